"""doctor's network checks: names (7: every node resolves every peer alike, never itself to a
loopback address), the network (8: one subnet and MTU common to every node) and RDMA ports (8:
where any node has them, every node has an active one and none is down)."""

from __future__ import annotations

import ipaddress
from collections import Counter

from provision.doctor.compare import answered, hosts_list, majority
from provision.doctor.model import FAIL, PASS, WARN, CheckResult, NodeReport


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_names(reports: list[NodeReport]) -> CheckResult:
    """Check 7: every node resolves every peer's name to one address, and no node resolves its
    own name to a loopback address (127.0.1.1) while its peers reach it on a real one."""
    name = "names"
    reached = [r for r in answered(reports) if r.resolved]
    problems: list[str] = []
    nodes: dict[str, str] = {}  # host -> what it resolves wrong (in the order found)

    def blame(host: str, said: str) -> None:
        nodes[host] = f"{nodes[host]}; {said}" if host in nodes else said

    for target in (r.host for r in reached):
        by_peer = {r.host: r.resolved.get(target, "") for r in reached if r.host != target}
        unresolved = [h for h, a in by_peer.items() if not a]
        if unresolved:
            problems.append(f"{hosts_list(unresolved)} cannot resolve {target}")
            for host in unresolved:
                blame(host, f"cannot resolve {target}")
        known = {h: a for h, a in by_peer.items() if a}
        if not known:
            continue
        common, odd = majority(known)
        if odd:
            problems.append(f"{target} is " + ", ".join(f"{known[h]} on {h}" for h in odd[:4]) + f"; {common} on the others")
            for host in odd:
                blame(host, f"resolves {target} to {known[host]} (the others {common})")
        own = next(r for r in reached if r.host == target).resolved.get(target, "")
        if own and _loopback(own) and not _loopback(common):
            problems.append(f"{target} resolves its own name to {own}, its peers to {common} (OpenMPI/torchrun hang)")
            blame(target, f"resolves its own name to {own}, its peers to {common}")
    if problems:
        return CheckResult(name, FAIL, tuple(nodes), "; ".join(problems), nodes=nodes)
    unread = [r.host for r in answered(reports) if not r.resolved]
    if unread:  # the lookups run in the job user's session: none there is nothing checked, not a pass
        why = "no session as the job user ran there"
        return CheckResult(name, WARN, tuple(unread), f"not checked on {hosts_list(unread)} ({why})")
    return CheckResult(name, PASS, (), f"every node resolves all {len(reached)} names alike")


def _subnets(report: NodeReport) -> dict[str, str]:
    """``{interface: IPv4 subnet}`` of the node's up, non-loopback interfaces."""
    subnets = {}
    for interface in report.facts.interfaces:
        if not interface.up:
            continue
        for address in interface.addresses:
            parsed = ipaddress.ip_interface(address) if "/" in address else None
            if parsed and parsed.version == 4 and not parsed.is_loopback:
                subnets[interface.name] = str(parsed.network)
                break
    return subnets


def check_network(reports: list[NodeReport]) -> CheckResult:
    """Check 8: an interface with one subnet common to every node (for btl_tcp_if_include and
    NCCL_SOCKET_IFNAME), with one MTU everywhere."""
    name = "network"
    reached = [r for r in answered(reports) if r.facts.interfaces]
    if not reached:
        return CheckResult(name, WARN, (), "no node reported its interfaces (ip not installed?)")
    subnets = {r.host: _subnets(r) for r in reached}
    common = set.intersection(*(set(s.items()) for s in subnets.values()))
    if not common:
        names = Counter(n for s in subnets.values() for n in s)
        best = names.most_common(1)[0][0] if names else None
        lacking = [h for h, s in subnets.items() if best is None or best not in s]
        return CheckResult(
            name,
            FAIL,
            tuple(lacking),
            "no interface with one subnet on every node"
            + (f": {best} is missing or on another subnet on {hosts_list(lacking)}" if best else ""),
            nodes=dict.fromkeys(lacking, f"{best} missing or on another subnet" if best else "no interface with an IPv4 subnet"),
        )
    shown = []
    for interface, subnet in sorted(common):
        mtus = {r.host: r.facts.mtu(interface) or "unknown" for r in reached}
        mtu, odd = majority(mtus)
        if odd:
            differ = ", ".join(f"{mtus[h]} on {h}" for h in odd[:6])
            nodes = {h: f"{interface} MTU {mtus[h]} (the others {mtu})" for h in odd}
            return CheckResult(name, FAIL, tuple(odd), f"{interface} MTU {differ}; {mtu} on the others", nodes=nodes)
        shown.append(f"{interface} ({subnet}, MTU {mtu})")
    return CheckResult(name, PASS, (), "common to every node: " + ", ".join(shown))


def check_rdma(reports: list[NodeReport]) -> CheckResult:
    """Check 8, InfiniBand/RoCE: where any node has ports, every node has an Active one and no port is down."""
    name = "rdma"
    reached = answered(reports)
    ports = {r.host: r.facts.rdma_ports() for r in reached}
    if not any(ports.values()):
        return CheckResult(name, PASS, (), "no InfiniBand/RoCE port on any node (TCP only)")
    problems = []
    nodes: dict[str, str] = {}
    for report in reached:
        if not ports[report.host]:
            nodes[report.host] = "no InfiniBand/RoCE port"
            problems.append(f"{report.host} has no InfiniBand/RoCE port")
        else:
            down = [f"{name} {port.state}" for name, port in ports[report.host] if not port.active]
            if down:
                nodes[report.host] = ", ".join(down)
                problems.append(f"{report.host}: " + ", ".join(down))
    if problems:
        return CheckResult(name, FAIL, tuple(nodes), "; ".join(problems) + " (the others: every port ACTIVE)", nodes=nodes)
    count = sum(len(found) for found in ports.values())
    return CheckResult(name, PASS, (), f"{count} port(s) ACTIVE on {len(reached)} node(s)")
