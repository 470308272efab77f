"""Each host's rails: the one ``NCCL_IB_HCA`` every rank of a host gets, and the same rails on every host.

NCCL picks each GPU's NIC itself from the topology it detects; ``NCCL_IB_HCA`` only filters the
devices it may pick from, and it must be the same for every rank of a host (NVIDIA/nccl#1478, the
maintainer: "You should not set NCCL_IB_HCA differently on each rank"; nv-legate/legate#528). So a
host's value is the exact-match list (``=``: ``mlx5_1`` alone would also match ``mlx5_10``;
src/misc/utils.cc ``matchIf``) of its rails: the usable ports (ACTIVE; on RoCE with a RoCE v2 GID)
that are some planned GPU's nearest, ``dev:port`` each, in natural name order, so identical hosts
get identical text.

Hosts whose rails differ (a port down on one, other device names, another link layer or rate)
make NCCL build channels with no peer and hang (NVIDIA/nccl#2428, #1277): :func:`plan_rails`
refuses them naming the odd host and what differs, or with ``common`` takes the rails every host
has and says what it left out.

``NCCL_IB_GID_INDEX`` is one value per process (src/transport/net_ib/connect.cc: ``NCCL_PARAM(IbGidIndex,
"IB_GID_INDEX", -1)``, used for every RoCE port), so a host gets it only when all its RoCE rails
have their RoCE v2 GID at the same index; otherwise NCCL's own choice (-1) is left alone.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from provision.errors import PlanError
from provision.facts.model import DISTANCES, HostFacts, RdmaDevice, RdmaPort
from provision.plans.rankfile import some_names


@dataclass(frozen=True, order=True)
class Rail:
    """A port as NCCL and the fabric see it: compared across hosts by all four fields."""

    device: str
    port: int
    link_layer: str | None
    rate: str | None

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


def host_rails(
    facts: HostFacts, usable: list[tuple[RdmaDevice, RdmaPort, int | None]], gpus: list[int | None]
) -> tuple[list[Rail], dict[Rail, int | None]]:
    """The usable ports nearest some GPU of ``gpus`` (all usable ports when no GPU is known), and
    each rail's RoCE v2 GID index."""
    gid = {Rail(d.name, p.number, p.link_layer, p.rate): g for d, p, g in usable}
    chosen: set[Rail] = set()
    known = [g for g in gpus if g is not None]
    for gpu in known or [None]:
        if not usable:
            break
        near = {Rail(d.name, p.number, p.link_layer, p.rate): order(distance(facts, gpu, d.name)) for d, p, _ in usable}
        best = min(near.values())
        chosen |= {rail for rail, closeness in near.items() if closeness == best}
    return sorted(chosen, key=rail_key), gid


def _gid_index(host: str, rails: list[Rail], gid: dict[Rail, int | None], notes: list[str]) -> int | None:
    indexes = {rail.hca(): gid[rail] for rail in rails if rail.link_layer == "Ethernet" and gid.get(rail) is not None}
    if len(set(indexes.values())) > 1:
        listing = ", ".join(f"{hca} {index}" for hca, index in indexes.items())
        notes.append(f"{host}: its RoCE rails have their RoCE v2 GID at different indexes ({listing}): NCCL_IB_GID_INDEX not set")
        return None
    return next(iter(indexes.values()), None)


def _describe(rails: tuple[Rail, ...]) -> str:
    return ", ".join(rail.hca() for rail in rails) or "no active RDMA port"


def _difference(mine: tuple[Rail, ...], theirs: tuple[Rail, ...], port_states: dict[str, str]) -> str:
    """What ``mine`` has that ``theirs`` lacks and the other way round, by port, then by link layer/rate."""
    by_hca = {rail.hca(): rail for rail in mine}
    their_hca = {rail.hca(): rail for rail in theirs}
    parts = []
    for hca in sorted(set(their_hca) - set(by_hca), key=lambda h: rail_key(their_hca[h])):
        state = port_states.get(hca, "absent")
        why = state if state != "ACTIVE" else "ACTIVE, but no RoCE v2 GID or no planned GPU nearest it"
        parts.append(f"no {hca} ({why})")
    for hca in sorted(set(by_hca) - set(their_hca), key=lambda h: rail_key(by_hca[h])):
        parts.append(f"{hca} that the others lack")
    for hca in sorted(set(by_hca) & set(their_hca), key=lambda h: rail_key(by_hca[h])):
        a, b = by_hca[hca], their_hca[hca]
        if a.link_layer != b.link_layer:
            parts.append(f"{hca} is {a.link_layer or '?'} (others {b.link_layer or '?'})")
        if a.rate != b.rate:
            parts.append(f"{hca} at {a.rate or '?'} (others {b.rate or '?'})")
    return "; ".join(parts)


def _states(facts: HostFacts) -> dict[str, str]:
    return {f"{d.name}:{p.number}": p.state for d in facts.rdma for p in d.ports}


def plan_rails(
    facts_list: list[HostFacts],
    usable: dict[str, list[tuple[RdmaDevice, RdmaPort, int | None]]],
    gpus: dict[str, list[int | None]],
    *,
    common: bool = False,
) -> RailPlan:
    """Every host's :class:`HostRails` and notes; :class:`PlanError` when the hosts' rails differ
    (unless ``common``: then the rails every host has, and a note per host on what was left out;
    when none is common, ``NCCL_IB_DISABLE=1`` for the job, so that no host uses IB while another
    uses sockets: NCCL's net-count check is off by default, src/init.cc ``IGNORE_NET_MISMATCH``, 1).

    ``usable``: each host's usable ports (:func:`provision.plans.nics.usable_ports`); ``gpus``:
    the GPUs its planned ranks drive."""
    notes: list[str] = []
    found: dict[str, list[Rail]] = {}
    gids: dict[str, dict[Rail, int | None]] = {}
    for facts in facts_list:
        found[facts.host], gids[facts.host] = host_rails(facts, usable[facts.host], gpus[facts.host])
    sets = {host: tuple(rails) for host, rails in found.items()}
    if len(set(sets.values())) > 1 and not common:
        usual = Counter(sets.values()).most_common(1)[0][0]
        states = {f.host: _states(f) for f in facts_list}
        odd = [h for h in sets if sets[h] != usual]
        lines = [f"{h}: {_difference(sets[h], usual, states[h])}" for h in odd[:5]]
        raise PlanError(
            f"the hosts' rails differ (NCCL builds channels with no peer and hangs: NVIDIA/nccl#2428): "
            f"{some_names([h for h in sets if sets[h] == usual])} have {_describe(usual)}; {'; '.join(lines)}"
            + (f"; and {len(odd) - 5} more hosts" if len(odd) > 5 else "")
            + "; fix the fabric, or --common-rails to use only the rails every host has"
        )
    ib_disable = False
    if common and len(set(sets.values())) > 1:
        shared = set.intersection(*(set(rails) for rails in sets.values()))
        for host, rails in sets.items():
            left = [rail.hca() for rail in rails if rail not in shared]
            if left:
                notes.append(f"{host}: --common-rails left out {', '.join(left)} (not the same on every host)")
        sets = {host: tuple(rail for rail in rails if rail in shared) for host, rails in sets.items()}
        if not shared:
            ib_disable = True
            notes.append("no rail is common to every host: NCCL_IB_DISABLE=1 for this job (every host on sockets)")
    elif facts_list and all(f.rdma for f in facts_list) and not any(sets.values()):
        notes.append("no host has an active RDMA port: NCCL_IB_HCA is not set for this job (NCCL uses sockets)")
    counts = Counter(len(f.gpus) for f in facts_list)
    if len(counts) > 1:
        usual = counts.most_common(1)[0][0]
        odd = [f"{f.host} has {len(f.gpus)}" for f in facts_list if len(f.gpus) != usual]
        notes.append(
            f"hosts have different GPU counts ({some_names(odd)}; the others {usual}): "
            "CUDA_VISIBLE_DEVICES lists the GPUs the plan uses on each host, in local-rank order; the others stay unused"
        )
    result = {}
    for facts in facts_list:
        rails = list(sets[facts.host])
        gid_index = _gid_index(facts.host, rails, gids[facts.host], notes)
        result[facts.host] = HostRails(facts.host, tuple(rails), gid_index, tuple(sorted(g.index for g in facts.gpus)))
    return RailPlan(result, tuple(notes), ib_disable)
