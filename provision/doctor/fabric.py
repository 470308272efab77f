"""doctor's fabric check: the nodes' RDMA rails compared the way NCCL compares them, the odd node named with what differs.

Each node's rails are its usable RDMA ports (ACTIVE; on RoCE with a RoCE v2 GID), compared by
place, link layer and rate with :func:`provision.plans.rails.compare_rails`, never by name (NCCL
lists and numbers each process's own devices: ``mlx5_1..8`` after a card swap is the same fabric
as ``mlx5_0..7``). What NCCL cannot connect FAILs: a node without a usable port beside nodes with
some, another link layer. What it runs on, crossing rails or at the slower rate, WARNs: a port
missing or DOWN where the others have one, another rate. Then the fabric interface (the one
``launch`` passes as ``NCCL_SOCKET_IFNAME``) should have the same MTU, and on RoCE each port its
RoCE v2 GID at the same index (what ``NCCL_IB_GID_INDEX`` would say): WARN. The majority is taken
as the norm.

Example: ``fabric  WARN  node03: no rail where node01 has mlx5_1:1 (mlx5_1:1 is DOWN); node07:
mlx5_0:1 at 100 Gb/sec (4X EDR) where node01's mlx5_0:1 is at 200 Gb/sec (4X HDR)``.
"""

from __future__ import annotations

from provision.doctor.compare import majority
from provision.doctor.model import FAIL, PASS, WARN, CheckResult, NodeReport
from provision.errors import PlanError
from provision.facts.model import HostFacts
from provision.plans.nics import fabric_interface, roce_gid, usable_ports
from provision.plans.rails import BREAKS, Rail, compare_rails, host_rails, port_states
from provision.plans.rankfile import some_names

NAME = "fabric"
SHOWN = 6  # odd nodes named in full


def _rails(facts: HostFacts) -> tuple[Rail, ...]:
    """Every usable port of the node, with its place (no GPU picks among them here)."""
    return tuple(host_rails(facts, usable_ports(facts, []), [])[0])


def _gid_indexes(facts: HostFacts) -> tuple[tuple[str, int | None], ...]:
    """((``dev/port``, its RoCE v2 GID's index as ``launch`` would use it), ...) for the ACTIVE RoCE ports."""
    return tuple(
        (f"{device.name}/{port.number}", roce_gid(device, port)[0])
        for device in facts.rdma
        for port in device.ports
        if port.active and port.roce
    )


def check_fabric(reports: list[NodeReport]) -> CheckResult:
    """The odd nodes' rails (FAIL where NCCL cannot connect them, else WARN), fabric-interface MTU
    and RoCE GID index (WARN), named with what differs."""
    reached = [r for r in reports if r.ok and r.facts is not None]
    if not any(r.facts.rdma for r in reached):
        return CheckResult(NAME, PASS, (), "no RDMA device on any node")
    rails = {r.host: _rails(r.facts) for r in reached}
    if not any(rails.values()):
        return CheckResult(
            NAME, WARN, (), "no node has a usable RDMA port (each is down, or RoCE without a RoCE v2 GID): NCCL uses sockets"
        )
    usual, differences = compare_rails(rails, {r.host: port_states(r.facts) for r in reached})
    problems = [(FAIL if d.kind == BREAKS else WARN, d.host, d.what) for d in differences]  # (status, host, what)
    try:
        interface = fabric_interface([r.facts for r in reached])
    except PlanError:
        interface = None  # no interface common to every node: the network check says so
    if interface:
        mtus = {r.host: r.facts.mtu(interface) for r in reached}
        mtu, odd = majority(mtus)
        problems += [(WARN, host, f"{interface} MTU {mtus[host]} (others {mtu})") for host in odd]
    gids = {r.host: _gid_indexes(r.facts) for r in reached if any(p.roce for d in r.facts.rdma for p in d.ports)}
    index, odd = majority(gids)
    for host in odd:
        differ = [f"{name} {i}" for name, i in gids[host] if (name, i) not in set(index)]
        problems.append((WARN, host, f"RoCE v2 GID index {', '.join(differ) or 'missing ports'} (others {dict(index)})"))
    if not problems:
        model = rails[usual[0]] if usual else ()
        shown = f"{len(model)} usable RDMA ports in the same places ({some_names(r.hca() for r in model)} on {usual[0]})"
        return CheckResult(NAME, PASS, (), f"every node: {shown}" + (f"; {interface} MTU {mtu}" if interface else ""))
    status = FAIL if any(s == FAIL for s, _, _ in problems) else WARN
    hosts = tuple(dict.fromkeys(h for _, h, _ in problems))
    nodes = {h: "; ".join(what for _, host, what in problems if host == h) for h in hosts}
    node_status = {h: FAIL if any(s == FAIL for s, host, _ in problems if host == h) else WARN for h in hosts}
    lines = [f"{h}: {what}" for _, h, what in problems[:SHOWN]]
    more = f"; and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
    why = (
        " (NCCL cannot connect these: a node on sockets beside RDMA ones, or another link layer)"
        if status == FAIL
        else " (NCCL runs, crossing rails or at the slower rate)"
    )
    return CheckResult(NAME, status, hosts, "; ".join(lines) + more + why, nodes=nodes, node_status=node_status)
