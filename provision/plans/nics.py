"""Each rank's NIC and the job's fabric interface, from the plan and the hosts' facts.

- Each rank (learner x drives GPU x) gets the nearest ACTIVE RDMA port to its GPU, nearest in
  nvidia-smi's classes (PIX < PXB < PHB < NODE < SYS < unknown); among equally near ports the
  one fewest ranks on that host use so far, then by name, so ties are spread evenly.
- A port that is not ACTIVE is never chosen (the facts carry a note). A RoCE port is usable only
  with a RoCE v2 GID on its own interface (its index is what NCCL_IB_GID_INDEX and
  UCX_IB_GID_INDEX need); without one it is left out, with a note saying so.
- Each host's rails and the one ``NCCL_IB_HCA`` its ranks share: :mod:`provision.plans.rails`;
  a rank's own port is its nearest among its host's rails (for ``UCX_NET_DEVICES``).
- The fabric interface (NCCL_SOCKET_IFNAME, OpenMPI's btl_tcp_if_include, torchrun's master
  address) is one up with an IPv4 address on every host, never a container bridge; when every
  host has interfaces but none is common, :class:`PlanError` names each host's interfaces.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from dataclasses import dataclass, field

from provision.errors import PlanError, UnsafeValueError
from provision.facts.model import HostFacts, RdmaDevice, RdmaPort
from provision.plans.rails import HostRails, Rail, distance, order, plan_rails
from provision.plans.rankfile import RankPlan, some_names
from provision.text import shown_value

UNKNOWN = "?"
_IFACE = re.compile(r"^[A-Za-z0-9._-]{1,15}\Z")  # a device name: Linux allows no ':' (an alias label has one)
_VIRTUAL = ("docker", "virbr", "veth", "br-", "cni", "flannel", "cali", "vxlan", "tun", "tap")


@dataclass(frozen=True)
class RankNic:
    """The NIC port one rank uses, and the settings that say so."""

    rank: int
    host: str
    local_rank: int
    gpu: int | None  # the GPU index it drives (CUDA_VISIBLE_DEVICES), None without one
    device: str | None  # RDMA device, None: no usable RDMA port on the host
    port: int | None
    distance: str  # PIX..SYS, or "?" when nothing tells
    gid_index: int | None  # RoCE only: the RoCE v2 GID's index
    link_layer: str | None

    def hca(self) -> str | None:
        """``mlx5_0:1``."""
        return f"{self.device}:{self.port}" if self.device is not None else None


@dataclass(frozen=True)
class NicPlan:
    """Every rank's NIC (in rank order), the fabric interface, and why some port was not used."""

    ranks: tuple[RankNic, ...]
    interface: str | None
    notes: tuple[str, ...]
    hosts: dict[str, HostRails] = field(default_factory=dict)  # each host's NCCL_IB_HCA, GID index, GPUs
    ib_disable: bool = False  # NCCL_IB_DISABLE=1 for the job (--common-rails found no common rail)

    def of_host(self, host: str) -> list[RankNic]:
        """The ranks on ``host``, by local rank."""
        return sorted((r for r in self.ranks if r.host == host), key=lambda r: r.local_rank)

    @property
    def per_rank(self) -> bool:
        """True when some rank has a GPU or NIC of its own to be told about."""
        return any(r.gpu is not None or r.device is not None for r in self.ranks)


def roce_gid(device: RdmaDevice, port: RdmaPort) -> tuple[int | None, str | None]:
    """(index of the RoCE v2 GID on the port's interface, IPv4-mapped first; why not)."""
    netdev = port.netdev()
    v2 = [gid for gid in port.gids if gid.type == "RoCE v2"]
    on_netdev = [gid for gid in v2 if netdev is None or gid.netdev == netdev]
    if not on_netdev:
        table = ", ".join(f"{g.index}: {g.type or 'type ?'} on {g.netdev or '?'}" for g in port.gids[:8]) or "empty"
        return None, (
            f"{device.name} port {port.number} (RoCE) has no RoCE v2 GID on its interface {netdev or '?'} "
            f"(GID table: {table}); not used (give {netdev or 'the interface'} an IP address, or check rdma's RoCE mode)"
        )
    best = sorted(on_netdev, key=lambda gid: (not gid.ipv4_mapped, gid.index))[0]
    return best.index, None


def usable_ports(facts: HostFacts, notes: list[str]) -> list[tuple[RdmaDevice, RdmaPort, int | None]]:
    usable = []
    for device in facts.rdma:
        for port in device.ports:
            if not port.active:
                notes.append(f"{facts.host}: {device.name} port {port.number} is {port.state}: not used")
                continue
            gid_index = None
            if port.roce:
                gid_index, why = roce_gid(device, port)
                if why:
                    notes.append(f"{facts.host}: {why}")
                    continue
            usable.append((device, port, gid_index))
    return usable


def _rank_gpus(plan: RankPlan) -> dict[str, list[int | None]]:
    gpus = {}
    for host_plan in plan.hosts:
        indexes = {gpu.index for gpu in plan.facts[host_plan.index].gpus}
        slots = sorted(host_plan.slots, key=lambda s: s.rank)
        gpus[plan.facts[host_plan.index].host] = [s.learner if s.learner in indexes else None for s in slots]
    return gpus


def plan_nics(plan: RankPlan, iface: str | None = None, *, common_rails: bool = False) -> NicPlan:
    """Every rank's NIC port, each host's rails (:func:`provision.plans.rails.plan_rails`: a
    :class:`PlanError` when they cannot connect, unless ``common_rails``), and the fabric interface
    (``iface``, else :func:`fabric_interface`)."""
    check_claimed_names(list(plan.facts))
    notes: list[str] = []
    ranks = []
    hosts = sorted(plan.hosts, key=lambda h: h.index)
    found = {plan.facts[h.index].host: usable_ports(plan.facts[h.index], notes) for h in hosts}
    gpus = _rank_gpus(plan)
    rail_plan = plan_rails([plan.facts[h.index] for h in hosts], found, gpus, common=common_rails)
    for host_plan in hosts:
        facts = plan.facts[host_plan.index]
        rails = set(rail_plan.hosts[facts.host].rails)
        usable = [u for u in found[facts.host] if Rail(u[0].name, u[1].number, u[1].link_layer, u[1].rate) in rails]
        usable = usable or found[facts.host]
        used: Counter = Counter()
        slots = sorted(host_plan.slots, key=lambda s: s.rank)
        for local_rank, (slot, gpu) in enumerate(zip(slots, gpus[facts.host], strict=True)):
            if not usable:
                ranks.append(RankNic(slot.rank, facts.host, local_rank, gpu, None, None, UNKNOWN, None, None))
                continue
            device, port, gid_index = min(
                usable,
                key=lambda u: (order(distance(facts, gpu, u[0].name)), used[(u[0].name, u[1].number)], u[0].name, u[1].number),
            )
            used[(device.name, port.number)] += 1
            ranks.append(
                RankNic(
                    slot.rank,
                    facts.host,
                    local_rank,
                    gpu,
                    device.name,
                    port.number,
                    distance(facts, gpu, device.name),
                    gid_index,
                    port.link_layer,
                )
            )
        if facts.rdma and not usable:
            notes.append(f"{facts.host}: no usable RDMA port; its ranks use TCP sockets")
    if iface == "":  # none asked for (topology, drawing what it can)
        interface = None
    else:
        interface = check_interface(iface, list(plan.facts)) if iface is not None else fabric_interface(list(plan.facts))
    ordered = tuple(sorted(ranks, key=lambda r: r.rank))
    return NicPlan(ordered, interface, tuple(notes) + rail_plan.notes, rail_plan.hosts, rail_plan.ib_disable)


def _short(name: str) -> str:
    return name.split(".", 1)[0]


def check_claimed_names(facts_list: list[HostFacts]) -> None:
    """A :class:`PlanError` naming the node whose reported hostname is another host's inventory
    name in the job (in full or short): its facts could take that host's place. A host's identity
    in what ``launch`` writes is its inventory name; a node's word about itself never tells hosts apart."""
    for facts in facts_list:
        claimed = {facts.hostname, _short(facts.hostname)} - {"", facts.host, _short(facts.host)}
        for other in facts_list:
            if other.host != facts.host and claimed & {other.host, _short(other.host)}:
                raise PlanError(
                    f"{facts.host}: reports hostname {shown_value(facts.hostname[:60])}, a name of {other.host} in this job: "
                    f"not planned (check {facts.host}'s hostname, or probe it again)"
                )


def check_interface(name: str, facts_list: list[HostFacts]) -> str:
    """``name`` (``--iface``) when it is an interface name and up on every host whose facts list
    interfaces; :class:`UnsafeValueError` / :class:`PlanError` naming the hosts otherwise.

    An alias label (``eth0:1``) is refused: NCCL splits each ``NCCL_SOCKET_IFNAME`` entry at ``:``
    into a name and a port (src/misc/utils.cc ``parseStringList``) and matches each address's
    interface name whole (src/os/linux.cc ``ncclOsFindInterfaces``), so it would take ``eth0``'s own
    address, never the alias's."""
    device, colon, _ = name.partition(":")
    if colon and _IFACE.match(device):
        raise PlanError(
            f"--iface {name}: NCCL reads what follows ':' in NCCL_SOCKET_IFNAME as a port, so it would use interface "
            f"{device} and its own address, not the alias {name} (src/misc/utils.cc parseStringList); "
            f"give --iface {device}, the device the alias address is on"
        )
    if not _IFACE.match(name):
        raise UnsafeValueError(f"--iface {shown_value(name[:40])}: not an interface name")
    lacking = [f.host for f in facts_list if f.interfaces and name not in {i.name for i in f.interfaces if i.up}]
    if lacking:
        raise PlanError(f"interface {name} is not up on: {', '.join(lacking)}")
    return name


def _candidates(facts: HostFacts) -> set[str]:
    return {i.name for i in facts.interfaces if i.up and i.ipv4() and i.name != "lo" and not i.name.startswith(_VIRTUAL)}


def fabric_interface(facts_list: list[HostFacts]) -> str | None:
    """The interface up with an IPv4 address on every host (InfiniBand/RDMA-backed first).

    None when some host's facts list no interface at all (old facts, a replay without ``ip``);
    :class:`PlanError` naming each host's interfaces when all have some but none is shared.
    """
    if not facts_list or any(not f.interfaces for f in facts_list):
        return None
    per_host = {f.host: _candidates(f) for f in facts_list}
    shared = set.intersection(*per_host.values())
    if not shared:
        by_names: dict[tuple[str, ...], list[str]] = {}
        for host, names in per_host.items():
            by_names.setdefault(tuple(sorted(names)), []).append(host)
        listing = "; ".join(f"{some_names(hosts)} have {', '.join(names) or 'none'}" for names, hosts in by_names.items())
        raise PlanError(
            f"no network interface is up with an IPv4 address on every host ({listing}); "
            "name one with --iface, or give the hosts a common interface name"
        )
    rdma_backed = {i.name for f in facts_list for i in f.interfaces if i.pci_address in {d.pci_address for d in f.rdma}}
    chosen = sorted(shared, key=lambda name: (name not in rdma_backed, not name.startswith("ib"), name))[0]
    if not _IFACE.match(chosen):  # a node's `ip` may name anything: it goes into launchers' shell text
        raise UnsafeValueError(
            f"interface {shown_value(chosen[:40])} (on every host) is not an interface name that can be passed on"
        )
    return chosen


def master_address(facts_list: list[HostFacts], interface: str | None) -> str:
    """An IPv4 address of the first host that every other host reaches directly (same subnet on
    ``interface``, else on any interface); :class:`PlanError` when there is none."""
    first, others = facts_list[0], facts_list[1:]

    def networks(facts: HostFacts, name: str | None) -> list[ipaddress.IPv4Interface]:
        return [
            ipv4_interface(facts.host, address)
            for i in facts.interfaces
            if (name is None or i.name == name) and i.up and i.name != "lo" and not i.name.startswith(_VIRTUAL)
            for address in i.ipv4()
        ]

    for name in (interface, None):
        for mine in networks(first, name):
            if all(any(mine.ip in theirs.network for theirs in networks(other, name)) for other in others):
                return str(mine.ip)
    raise PlanError(
        f"no address of {first.host} is in a subnet every other host has "
        f"({', '.join(str(i) for i in networks(first, None)) or 'no IPv4 address'}): "
        "the job's master (torchrun's, DeepSpeed's) must be reachable from every host"
    )


def ipv4_interface(host: str, address: str) -> ipaddress.IPv4Interface:
    """``address`` (``a.b.c.d/len`` from a node's ``ip addr``) parsed; a :class:`PlanError` naming
    the host when it is not one (``/99``): a node's bad data fails that node with one line."""
    try:
        return ipaddress.IPv4Interface(address)
    except ValueError:  # AddressValueError and NetmaskValueError both are
        raise PlanError(f"{host}: ip-addr lists {shown_value(address[:60])}, not an IPv4 address with a prefix length") from None
