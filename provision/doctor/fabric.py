"""doctor's fabric check: the nodes' RDMA fabric compared across nodes, the odd node named with what differs.

NCCL hangs, with no error, when nodes expose different RDMA port sets (NVIDIA/nccl#2428, #1277:
channels built on one node's extra port have no peer), so every node should show the same
devices and ports, each in the same state, link layer and rate; the fabric interface (the one
``launch`` passes as ``NCCL_SOCKET_IFNAME``) the same MTU; and on RoCE each port's RoCE v2 GID at
the same index (what ``NCCL_IB_GID_INDEX`` would say). The majority is taken as the norm.

Example: ``fabric  FAIL  node03: mlx5_1/1 DOWN (others ACTIVE); node07: mlx5_0/1 at 100 Gb/sec
(4X EDR) (others 200 Gb/sec (4X HDR))``.
"""

from __future__ import annotations

from provision.doctor.compare import majority
from provision.doctor.model import FAIL, PASS, WARN, CheckResult, NodeReport
from provision.errors import PlanError
from provision.facts.model import HostFacts
from provision.plans.nics import fabric_interface, roce_gid
from provision.plans.rails import natural

NAME = "fabric"
SHOWN = 6  # odd nodes named in full


def _ports(facts: HostFacts) -> dict[str, tuple[str, str | None, str | None]]:
    """{``dev/port``: (state, link layer, rate)}."""
    return {f"{d.name}/{p.number}": (p.state, p.link_layer, p.rate) for d in facts.rdma for p in d.ports}


def _gid_indexes(facts: HostFacts) -> tuple[tuple[str, int | None], ...]:
    """((``dev/port``, its RoCE v2 GID's index as ``launch`` would use it), ...) for the ACTIVE RoCE ports."""
    return tuple(
        (f"{device.name}/{port.number}", roce_gid(device, port)[0])
        for device in facts.rdma
        for port in device.ports
        if port.active and port.roce
    )


def _port_difference(mine: dict, usual: dict) -> str:
    parts = []
    key = lambda name: natural(name)  # noqa: E731 - one sort key, three uses
    for name in sorted(set(usual) - set(mine), key=key):
        parts.append(f"no {name}")
    for name in sorted(set(mine) - set(usual), key=key):
        parts.append(f"{name} that the others lack")
    for name in sorted(set(mine) & set(usual), key=key):
        for what, a, b in zip(("", "", "at "), mine[name], usual[name], strict=True):
            if a != b:
                parts.append(f"{name} {what}{a or '?'} (others {b or '?'})")
    return ", ".join(parts)


def check_fabric(reports: list[NodeReport]) -> CheckResult:
    """The odd nodes' RDMA ports (FAIL), fabric-interface MTU and RoCE GID index (WARN), named with what differs."""
    reached = [r for r in reports if r.ok and r.facts is not None]
    if not any(r.facts.rdma for r in reached):
        return CheckResult(NAME, PASS, (), "no RDMA device on any node")
    problems: list[tuple[str, str, str]] = []  # (status, host, what)
    ports = {r.host: _ports(r.facts) for r in reached}
    usual, odd = majority({host: tuple(sorted(p.items())) for host, p in ports.items()})
    for host in odd:
        problems.append((FAIL, host, _port_difference(ports[host], dict(usual))))
    try:
        interface = fabric_interface([r.facts for r in reached])
    except PlanError:
        interface = None  # no interface common to every node: the network check says so
    if interface:
        mtus = {r.host: next((i.mtu for i in r.facts.interfaces if i.name == interface), None) for r in reached}
        mtu, odd = majority(mtus)
        problems += [(WARN, host, f"{interface} MTU {mtus[host]} (others {mtu})") for host in odd]
    gids = {r.host: _gid_indexes(r.facts) for r in reached if any(p.roce for d in r.facts.rdma for p in d.ports)}
    index, odd = majority(gids)
    for host in odd:
        differ = [f"{name} {i}" for name, i in gids[host] if (name, i) not in set(index)]
        problems.append((WARN, host, f"RoCE v2 GID index {', '.join(differ) or 'missing ports'} (others {dict(index)})"))
    if not problems:
        shown = ", ".join(name for name, _ in usual) if usual else "none"
        return CheckResult(NAME, PASS, (), f"every node: {shown}" + (f"; {interface} MTU {mtu}" if interface else ""))
    status = FAIL if any(s == FAIL for s, _, _ in problems) else WARN
    hosts = tuple(dict.fromkeys(h for _, h, _ in problems))
    nodes = {h: "; ".join(what for _, host, what in problems if host == h) for h in hosts}
    node_status = {h: FAIL if any(s == FAIL for s, host, _ in problems if host == h) else WARN for h in hosts}
    lines = [f"{h}: {what}" for _, h, what in problems[:SHOWN]]
    more = f"; and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
    detail = "; ".join(lines) + more + " (NCCL hangs on rails that differ: NVIDIA/nccl#2428)"
    return CheckResult(NAME, status, hosts, detail, nodes=nodes, node_status=node_status)
