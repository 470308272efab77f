"""Each host's rails: the one ``NCCL_IB_HCA`` every rank of a host gets, and the hosts' rails compared the way NCCL compares them.

NCCL picks each GPU's NIC itself from the topology it detects; ``NCCL_IB_HCA`` only filters the
devices it may pick from, and it must be the same for every rank of a host (NVIDIA/nccl#1478,
sjeaugey: "You should not set NCCL_IB_HCA differently on each rank"). So a host's value is the
exact-match list (``=``: ``mlx5_1`` alone would also match ``mlx5_10``; src/misc/utils.cc:218
``matchIf``) of its rails: the usable ports (ACTIVE; on RoCE with a RoCE v2 GID) that are some
planned GPU's nearest, ``dev:port`` each, in natural name order, so identical hosts get identical
text. Hosts whose ports carry other names get their own list: the value is per host, never per rank.

NCCL never compares device names across ranks. Each process lists its own devices
(src/transport/net_ib/init.cc: the NCCL_IB_HCA filter, ACTIVE ports only), sorts them by PCI
address "to ensure a consistent order across nodes" (init.cc:483) and knows them by that index
(src/graph/topo.cc:406); what ranks exchange about the network is a device count and bandwidths
(src/init.cc:1272). So hosts are compared by each rail's *place*: the host's GPUs it is nearest and
its rank among the ports nearest the same GPUs, in PCI order (:func:`places`). Then:

- other names in the same places: the same fabric to NCCL; nothing to say;
- a host with rails beside one with none (sockets there, IB elsewhere: no rank tells another
  which transport it uses, src/plugin/net.cc:181) and a link layer that differs (NCCL refuses to
  connect an InfiniBand port to an Ethernet one, src/transport/net_ib/connect.cc:1028-1038):
  refused, :class:`PlanError` naming the host;
- another rail count or other places: a note. NCCL goes on (its count check is off by default,
  src/init.cc:131 and 1333) and crosses rails where a host lacks one, which works where the rails
  meet at the top of the fabric (NVIDIA/nccl#2193, sjeaugey); ``common`` keeps only the places
  every host has, so every host lists as many rails, in the same places;
- another rate: a note (a ring runs at its slowest link, and NCCL tunes every rank for the lowest
  inter-node bandwidth of any, src/init.cc:1442).

``NCCL_IB_GID_INDEX`` is one value per process (src/transport/net_ib/connect.cc:12 ``NCCL_PARAM(IbGidIndex,
"IB_GID_INDEX", -1)``, read at line 318 for every RoCE port), so a host gets it only when all its
RoCE rails have their RoCE v2 GID at the same index; otherwise NCCL's own choice (-1) is left alone.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from provision.errors import PlanError
from provision.facts.model import DISTANCES, HostFacts, RdmaDevice, RdmaPort
from provision.plans.rankfile import some_names

Place = tuple[tuple[int, ...], int]  # (the GPUs the port is nearest, its rank among ports nearest the same GPUs)


@dataclass(frozen=True, order=True)
class Rail:
    """A port as NCCL and the fabric see it: its name, link layer, rate, and its place on the host
    (:func:`places`), by which hosts are compared (equality and order leave the place out)."""

    device: str
    port: int
    link_layer: str | None
    rate: str | None
    place: Place = field(default=((), 0), compare=False)

    def hca(self) -> str:
        """``mlx5_0:1``."""
        return f"{self.device}:{self.port}"


@dataclass(frozen=True)
class HostRails:
    """One host's NCCL settings: its rails (``NCCL_IB_HCA``), its GID index, its GPUs."""

    host: str
    rails: tuple[Rail, ...]
    gid_index: int | None  # NCCL_IB_GID_INDEX, RoCE only, when every RoCE rail agrees
    gpus: tuple[int, ...]  # every GPU index of the host, ascending

    def hca(self) -> str | None:
        """``=mlx5_0:1,mlx5_1:1``, None without a rail."""
        return "=" + ",".join(rail.hca() for rail in self.rails) if self.rails else None


@dataclass(frozen=True)
class RailPlan:
    """Every host's rails, and what the job as a whole gets."""

    hosts: dict[str, HostRails]
    notes: tuple[str, ...]
    ib_disable: bool  # no rail common to hosts some of which have rails: every host on sockets


BREAKS, CROSSES, SLOWER = "breaks", "crosses", "slower"  # what a difference does to NCCL


@dataclass(frozen=True)
class RailDifference:
    """What one host's rails have otherwise than the usual host's, and what that does: NCCL cannot
    connect it (BREAKS), crosses rails there (CROSSES), or runs at the slower rate (SLOWER)."""

    host: str
    kind: str
    what: str


def natural(name: str) -> tuple:
    """Sort key: ``mlx5_2`` before ``mlx5_10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def rail_key(rail: Rail) -> tuple:
    """Natural order of device, then port."""
    return natural(rail.device), rail.port


def order(distance: str) -> int:
    """Nearest first (PIX=0 ... SYS=4, unknown last)."""
    return DISTANCES.index(distance) if distance in DISTANCES else len(DISTANCES)


def distance(facts: HostFacts, gpu: int | None, device: str) -> str:
    """nvidia-smi's class between ``gpu`` and ``device`` (``?`` when nothing tells)."""
    for link in facts.gpu_nics:
        if link.gpu == gpu and link.device == device:
            return link.distance
    return "?"


def pci_order(device: RdmaDevice) -> tuple:
    """NCCL's order of a host's devices: by PCI address (src/transport/net_ib/init.cc:44
    ``ncclIbCompareDevs``), those without one last; then by name.

    >>> pci_order(RdmaDevice("mlx5_1", "0000:0c:00.0", None, ())) < pci_order(RdmaDevice("mlx5_0", "0000:8a:00.0", None, ()))
    True
    """
    numbers = re.fullmatch(r"([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", device.pci_address or "")
    return (0, *(int(n, 16) for n in numbers.groups())) if numbers else (1, 0, 0, 0, 0), natural(device.name)


def places(facts: HostFacts) -> dict[tuple[str, int], Place]:
    """``(device, port)`` -> its place, for every port of the host whatever its state: the host's
    GPUs it is nearest (every GPU when no distance is known) and its rank, in PCI order, among the
    ports nearest the same GPUs. A card swap that renames the ports keeps their places: ``mlx5_0``
    PXB to GPUs 0 and 1 on one host and ``mlx5_1`` PXB to them on another are both ``((0, 1), 0)``.
    """
    known = {(link.gpu, link.device): order(link.distance) for link in facts.gpu_nics}
    gpus = sorted(gpu.index for gpu in facts.gpus)
    ports = [(device, port) for device in sorted(facts.rdma, key=pci_order) for port in device.ports]
    best = {gpu: min((known.get((gpu, d.name), len(DISTANCES)) for d, _ in ports), default=0) for gpu in gpus}
    taken: Counter = Counter()
    found = {}
    for device, port in ports:
        near = tuple(gpu for gpu in gpus if known.get((gpu, device.name), len(DISTANCES)) == best[gpu])
        found[(device.name, port.number)] = (near, taken[near])
        taken[near] += 1
    return found


def host_rails(
    facts: HostFacts, usable: list[tuple[RdmaDevice, RdmaPort, int | None]], gpus: list[int | None]
) -> tuple[list[Rail], dict[Rail, int | None]]:
    """The usable ports nearest some GPU of ``gpus`` (all usable ports when no GPU is known), each
    with its place, and each rail's RoCE v2 GID index."""
    place = places(facts)

    def rail(device: RdmaDevice, port: RdmaPort) -> Rail:
        return Rail(device.name, port.number, port.link_layer, port.rate, place[(device.name, port.number)])

    gid = {rail(d, p): g for d, p, g in usable}
    chosen: set[Rail] = set()
    known = [g for g in gpus if g is not None]
    for gpu in known or [None]:
        if not usable:
            break
        near = {rail(d, p): order(distance(facts, gpu, d.name)) for d, p, _ in usable}
        best = min(near.values())
        chosen |= {one for one, closeness in near.items() if closeness == best}
    return sorted(chosen, key=rail_key), gid


def port_states(facts: HostFacts) -> dict[Place, str]:
    """Place -> what the host has there (``mlx5_3:1 is DOWN``), for every port: what a note says
    of a place where another host has a rail and this one has none."""
    found = places(facts)
    said = {}
    for device in facts.rdma:
        for port in device.ports:
            name = f"{device.name}:{port.number}"
            why = "is ACTIVE, but not usable or no planned GPU's nearest" if port.active else f"is {port.state}"
            said[found[(device.name, port.number)]] = f"{name} {why}"
    return said


def _layer(rail: Rail) -> str:
    return {"Ethernet": "Ethernet (RoCE)"}.get(rail.link_layer or "?", rail.link_layer or "?")


def _differ(
    host: str, mine: tuple[Rail, ...], model: str, theirs: tuple[Rail, ...], there: dict[Place, str]
) -> list[RailDifference]:
    """What ``host``'s rails have otherwise than ``model``'s, place by place; never the names."""
    by_place, their = {r.place: r for r in mine}, {r.place: r for r in theirs}
    found = []
    for place in sorted(set(by_place) & set(their)):
        a, b = by_place[place], their[place]
        if a.link_layer != b.link_layer:
            found.append(RailDifference(host, BREAKS, f"{a.hca()} is {_layer(a)} where {model}'s {b.hca()} is {_layer(b)}"))
        elif a.rate != b.rate:
            found.append(
                RailDifference(host, SLOWER, f"{a.hca()} at {a.rate or '?'} where {model}'s {b.hca()} is at {b.rate or '?'}")
            )
    layers, their_layers = {r.link_layer for r in mine}, {r.link_layer for r in theirs}
    if layers != their_layers and not any(d.kind == BREAKS for d in found):
        listed = " and ".join(sorted({_layer(r) for r in mine}))
        found.append(
            RailDifference(host, BREAKS, f"its rails are {listed}, {model}'s {' and '.join(sorted({_layer(r) for r in theirs}))}")
        )
    for place in sorted(set(their) - set(by_place)):
        found.append(
            RailDifference(host, CROSSES, f"no rail where {model} has {their[place].hca()} ({there.get(place, 'no port there')})")
        )
    for place in sorted(set(by_place) - set(their)):
        found.append(RailDifference(host, CROSSES, f"{by_place[place].hca()} where {model} has no rail"))
    return found


def compare_rails(
    rails: dict[str, tuple[Rail, ...]], there: dict[str, dict[Place, str]]
) -> tuple[list[str], list[RailDifference]]:
    """(the hosts whose rails are the usual ones, what each other host has otherwise), by place,
    link layer and rate; names are never compared. ``there``: :func:`port_states` of each host.
    A host without a rail beside hosts with some ``breaks`` (it would use sockets, the others
    RDMA), so does a link layer that differs; the rest NCCL runs on."""
    differences = []
    with_rails = {host: found for host, found in rails.items() if found}
    if with_rails and len(with_rails) < len(rails):
        why = "no usable RDMA port (NCCL would use sockets there and RDMA on the others)"
        differences += [RailDifference(host, BREAKS, why) for host, found in rails.items() if not found]
    if not with_rails:
        return list(rails), differences
    signature = {host: tuple(sorted((r.place, r.link_layer, r.rate) for r in found)) for host, found in with_rails.items()}
    usual = Counter(signature.values()).most_common(1)[0][0]  # on a tie, the first host's
    hosts = [host for host in with_rails if signature[host] == usual]
    for host, found in with_rails.items():
        if signature[host] != usual:
            differences += _differ(host, found, hosts[0], with_rails[hosts[0]], there.get(host, {}))
    return hosts, differences


def _gid_index(host: str, rails: list[Rail], gid: dict[Rail, int | None], notes: list[str]) -> int | None:
    indexes = {rail.hca(): gid[rail] for rail in rails if rail.link_layer == "Ethernet" and gid.get(rail) is not None}
    if len(set(indexes.values())) > 1:
        listing = ", ".join(f"{hca} {index}" for hca, index in indexes.items())
        notes.append(f"{host}: its RoCE rails have their RoCE v2 GID at different indexes ({listing}): NCCL_IB_GID_INDEX not set")
        return None
    return next(iter(indexes.values()), None)


def _describe(rails: tuple[Rail, ...]) -> str:
    return ", ".join(rail.hca() for rail in rails) or "no active RDMA port"


def _lines(differences: list[RailDifference], shown: int = 5) -> str:
    """``host: what; what`` per host, the first ``shown`` hosts, and how many more."""
    by_host: dict[str, list[str]] = {}
    for difference in differences:
        by_host.setdefault(difference.host, []).append(difference.what)
    lines = [
        f"{host}: {'; '.join(whats[:4])}" + (f"; and {len(whats) - 4} more" if len(whats) > 4 else "")
        for host, whats in by_host.items()
    ]
    return "; ".join(lines[:shown]) + (f"; and {len(lines) - shown} more hosts" if len(lines) > shown else "")


def _common(sets: dict[str, tuple[Rail, ...]], notes: list[str]) -> tuple[dict[str, tuple[Rail, ...]], bool]:
    """The rails in the places every host has with the same link layer, a note per host on what
    was left out; True when none is left to hosts some of which had rails."""
    shared = set.intersection(*({(r.place, r.link_layer) for r in rails} for rails in sets.values()))
    kept = {host: tuple(r for r in rails if (r.place, r.link_layer) in shared) for host, rails in sets.items()}
    for host, rails in sets.items():
        left = [rail.hca() for rail in rails if rail not in kept[host]]
        if left:
            notes.append(
                f"{host}: --common-rails left out {', '.join(left)} "
                "(not in the same place, with the same link layer, on every host)"
            )
    if not shared and any(sets.values()):
        notes.append("no rail is common to every host: NCCL_IB_DISABLE=1 for this job (every host on sockets)")
        return kept, True
    return kept, False


def plan_rails(
    facts_list: list[HostFacts],
    usable: dict[str, list[tuple[RdmaDevice, RdmaPort, int | None]]],
    gpus: dict[str, list[int | None]],
    *,
    common: bool = False,
) -> RailPlan:
    """Every host's :class:`HostRails` and notes. :class:`PlanError` when a host's rails cannot
    connect to the others' (:func:`compare_rails`: a host without one, another link layer),
    unless ``common``: then the rails in the places every host has, a note per host on what was
    left out, and when none is left ``NCCL_IB_DISABLE=1`` for the job, so that no host uses IB
    while another uses sockets. Other rail counts or places and other rates are notes.

    ``usable``: each host's usable ports (:func:`provision.plans.nics.usable_ports`); ``gpus``:
    the GPUs its planned ranks drive."""
    notes: list[str] = []
    found: dict[str, list[Rail]] = {}
    gids: dict[str, dict[Rail, int | None]] = {}
    for facts in facts_list:
        found[facts.host], gids[facts.host] = host_rails(facts, usable[facts.host], gpus[facts.host])
    sets = {host: tuple(rails) for host, rails in found.items()}
    ib_disable = False
    if common and sets:
        sets, ib_disable = _common(sets, notes)
    usual, differences = compare_rails(sets, {f.host: port_states(f) for f in facts_list})
    breaking = [d for d in differences if d.kind == BREAKS]
    if breaking:
        raise PlanError(
            f"the hosts' rails cannot connect: {some_names(usual)} {'has' if len(usual) == 1 else 'have'} "
            f"{_describe(sets[usual[0]])}; {_lines(breaking)}; "
            "fix the fabric, or --common-rails to use only the rails in the same places, with the same link layer, on every host"
        )
    crossing = [d for d in differences if d.kind == CROSSES]
    for host in dict.fromkeys(d.host for d in crossing):
        notes.append(
            f"{_lines([d for d in crossing if d.host == host])}: NCCL runs, and crosses rails there "
            "(which needs rails that meet at the top of the fabric; "
            "NCCL_IGNORE_NET_MISMATCH=0 makes NCCL refuse another rail count); "
            "--common-rails uses only the rails in places every host has"
        )
    slower = [d for d in differences if d.kind == SLOWER]
    for host in dict.fromkeys(d.host for d in slower):
        notes.append(f"{_lines([d for d in slower if d.host == host])}: NCCL runs every ring at its slowest rail's rate")
    if facts_list and all(f.rdma for f in facts_list) and not any(sets.values()):
        notes.append("no host has an active RDMA port: NCCL_IB_HCA is not set for this job (NCCL uses sockets)")
    counts = Counter(len(f.gpus) for f in facts_list)
    if len(counts) > 1:
        most = counts.most_common(1)[0][0]
        odd = [f"{f.host} has {len(f.gpus)}" for f in facts_list if len(f.gpus) != most]
        notes.append(
            f"hosts have different GPU counts ({some_names(odd)}; the others {most}): "
            "CUDA_VISIBLE_DEVICES lists the GPUs the plan uses on each host, in local-rank order; the others stay unused"
        )
    result = {}
    for facts in facts_list:
        rails = list(sets[facts.host])
        gid_index = _gid_index(facts.host, rails, gids[facts.host], notes)
        result[facts.host] = HostRails(facts.host, tuple(rails), gid_index, tuple(sorted(g.index for g in facts.gpus)))
    return RailPlan(result, tuple(notes), ib_disable)
