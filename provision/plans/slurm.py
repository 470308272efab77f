"""slurm.conf node lines from facts, in ``slurmd -C``'s format (plus ``Gres=gpu:N``).

The numbers follow what ``slurmd -C`` itself prints (Slurm's ``xcpuinfo_hwloc_topo_get``):
``CPUs``
the online hardware threads as they are, ``SocketsPerBoard`` the sockets that hold cores,
``CoresPerSocket`` all usable cores divided by the sockets and ``ThreadsPerCore`` the threads
divided by the cores (integer division, as slurmd does), so uneven sockets or mixed SMT never
inflate ``CPUs`` to sockets × cores × threads.

A node's identity is the inventory's, never what the node says (issue 24, finding 3):
``NodeName`` is the inventory name's short form (up to the first dot; an IP address whole). Where
the host calls itself otherwise, ``NodeHostname=`` names what it reports (slurmd finds its line by
``hostname -s``, slurm.conf(5) NodeHostname), unless that name is refused: a word slurm.conf
reserves, or another host's name (it would take that host's line), or a name another host
reports too (every such host is left out: neither claim is believed). A refused host is left out
with one line naming it; the others are kept.
"""

from __future__ import annotations

import ipaddress

from provision.facts.model import HostFacts
from provision.text import shown_value

# slurm.conf(5), NodeName: 'If the NodeName is "DEFAULT", the values specified with that record will
# apply to subsequent node specifications'; 'If the NodeName is "ALL" the process parsing the
# configuration will exit immediately as it is an internally reserved word.' Both compared without
# case (SchedMD/slurm src/common/read_config.c: xstrcasecmp(value, "DEFAULT"), xstrcasecmp(value, "ALL")).
RESERVED_NODE_NAMES = frozenset({"default", "all"})


def node_name(host: str) -> str:
    """The NodeName of inventory host ``host``: its short form, or an IP address whole."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.split(".", 1)[0]
    return host


def reported_name(facts: HostFacts) -> str:
    """What the host calls itself, short (``hostname -s``, what slurmd looks its line up by)."""
    return (facts.hostname or facts.host).split(".", 1)[0]


def inventory_problem(host: str, hosts: list[HostFacts]) -> bool:
    """Whether :func:`identity_problems` refuses ``host`` for the inventory's own names (a reserved
    word, or a NodeName an earlier inventory host has too): the user's to fix, not the node's."""
    name = node_name(host).lower()
    first = next((facts.host for facts in hosts if node_name(facts.host).lower() == name), host)
    return name in RESERVED_NODE_NAMES or first != host


def identity_problems(hosts: list[HostFacts]) -> dict[str, str]:
    """{inventory host: why it is left out} for hosts whose name is a reserved word or an earlier
    inventory host's NodeName too, or whose reported name is another host's (its NodeName, or the
    name another host reports)."""
    problems: dict[str, str] = {}
    owners: dict[str, str] = {}
    for facts in hosts:
        owners.setdefault(node_name(facts.host).lower(), facts.host)
    for facts in hosts:
        name, reported = node_name(facts.host), reported_name(facts)
        if name.lower() in RESERVED_NODE_NAMES:
            problems[facts.host] = (
                f"host {facts.host}: NodeName {shown_value(name)} is a word slurm.conf reserves (DEFAULT sets the values of "
                "every line after it, ALL stops slurmctld): give it another name in the inventory"
            )
        elif owners[name.lower()] != facts.host:  # checked before what it reports: the inventory's error, not the node's
            problems[facts.host] = (
                f"host {facts.host}: NodeName {shown_value(name)} is also host {owners[name.lower()]}'s (the inventory's names, "
                "up to the first dot): NodeName must be unique; rename one in the inventory"
            )
        elif reported.lower() in RESERVED_NODE_NAMES:
            problems[facts.host] = (
                f"host {facts.host}: it reports the host name {shown_value(reported)}, a word slurm.conf reserves (DEFAULT "
                f"sets the values of every line after it): left out; fix the host name on {facts.host}"
            )
        elif owners.get(reported.lower(), facts.host) != facts.host:
            problems[facts.host] = (
                f"host {facts.host}: it reports the host name {shown_value(reported)}, which is host "
                f"{owners[reported.lower()]}'s: left out (it would take that node's line); fix the host name on {facts.host}"
            )
    # Two hosts reporting one name: slurmd on either would take the other's line. Neither claim can
    # be believed over the other (the order of the inventory is no evidence), so every claimant is
    # left out: keeping the first would let a node listed earlier take an honest node's
    # NodeHostname (the honest node's slurmd then runs as the other's NodeName, with its counts).
    claimed: dict[str, list[str]] = {}
    for facts in hosts:
        if facts.host not in problems and reported_name(facts) != node_name(facts.host):
            claimed.setdefault(reported_name(facts).lower(), []).append(facts.host)
    for facts in hosts:
        claimants = claimed.get(reported_name(facts).lower(), [])
        if facts.host in claimants and len(claimants) > 1:
            others = ", ".join(h for h in claimants if h != facts.host)
            problems[facts.host] = (
                f"host {facts.host}: it reports the host name {shown_value(reported_name(facts))}, as host {others} does: "
                f"left out; fix the host name on {facts.host}"
            )
    return problems


def slurm_node_line(facts: HostFacts) -> str:
    """``NodeName=h CPUs=160 Boards=1 SocketsPerBoard=2 CoresPerSocket=10 ThreadsPerCore=8 RealMemory=...``
    (``NodeName`` the inventory's; check the hosts with :func:`identity_problems` first)."""
    cpu = facts.cpu
    threads = cpu.total_cpus
    cores = sum(len(socket.cores) for socket in cpu.sockets)
    sockets = max(cpu.socket_count, 1)
    name, reported = node_name(facts.host), reported_name(facts)
    parts = [
        f"NodeName={name}",
        *([f"NodeHostname={reported}"] if reported != name else []),
        f"CPUs={threads}",
        "Boards=1",
        f"SocketsPerBoard={sockets}",
        f"CoresPerSocket={cores // sockets}",
        f"ThreadsPerCore={threads // cores if cores else 1}",
    ]
    if facts.memory_mib is not None:
        parts.append(f"RealMemory={facts.memory_mib}")
    if facts.gpus:
        parts.append(f"Gres=gpu:{len(facts.gpus)}")
    return " ".join(parts)


def uneven_note(facts: HostFacts) -> str | None:
    """A warning when sockets or cores differ in size (slurm.conf cannot say so; slurmd logs the same)."""
    cpu = facts.cpu
    per_socket = {len(socket.cores) for socket in cpu.sockets}
    per_core = {len(core.cpus) for socket in cpu.sockets for core in socket.cores}
    problems = []
    if len(per_socket) > 1:
        problems.append(f"sockets hold {'/'.join(str(len(s.cores)) for s in cpu.sockets)} cores")
    if len(per_core) > 1:
        problems.append(f"cores run {'/'.join(map(str, sorted(per_core)))} threads")
    if not problems:
        return None
    return f"host {facts.host}: {' and '.join(problems)}; CPUs counts the threads as they are"
