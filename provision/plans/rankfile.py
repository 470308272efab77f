"""Rank files from facts, numbered exactly as PowerAI's rank_gen.py numbers them.

Host index h = z·Y + y (hosts given rack by rack); local learner x on that host gets rank
x·(Y·Z) + y·Z + z. Slots come from each host's own probed cores, never from an assumed chip:

- rank_gen rule: learners are spread evenly over the host's sockets (learner 0 first on socket 0);
  X ≤ sockets gives learner x all of socket x; otherwise X must be a multiple of the sockets.
- GPU-affinity rule (when every GPU 0..X-1 has a known socket): learner x, which drives GPU x,
  is bound to cores of GPU x's socket.
Each learner gets an equal contiguous block of its socket's usable cores, numbered from 0 within
the socket (``slot=S:first-last``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from provision import __version__
from provision.errors import PlanError
from provision.facts.model import HostFacts
from provision.inventory.model import Rack
from provision.plans.dims import Dims, rack_names
from provision.resources import render

RULE_RANK_GEN = "rank_gen: learners spread evenly over sockets, learner 0 first on socket 0"
RULE_GPU = "gpu-affinity: learner x bound to cores of GPU x's socket"


@dataclass(frozen=True)
class Slot:
    """One rank's binding: host, socket, a contiguous core block (socket-relative), its GPU."""

    rank: int
    host: str
    learner: int  # local learner x (drives GPU x)
    socket: int
    first_core: int
    last_core: int

    def slot_text(self) -> str:
        """``0:0-4`` (or ``0:3`` for a single core)."""
        cores = str(self.first_core) if self.first_core == self.last_core else f"{self.first_core}-{self.last_core}"
        return f"{self.socket}:{cores}"


@dataclass(frozen=True)
class HostPlan:
    """One host's part of the rank file."""

    host: str
    index: int  # h = z·Y + y
    rack: int  # z
    position: int  # y
    rule: str
    slots: tuple[Slot, ...]


@dataclass(frozen=True)
class RankPlan:
    """A whole rank file: dims, hosts in rank_gen order, each host's slots, warnings."""

    dims: Dims
    hosts: tuple[HostPlan, ...]
    facts: tuple[HostFacts, ...]
    warnings: tuple[str, ...]
    rack_names: tuple[str, ...] = ()  # the inventory's name of each rank-file rack z, when it has racks

    def rack_label(self, z: int) -> str:
        """``rack 1`` or, from the inventory, ``rack 1 (rack-a)``."""
        return f"rack {z + 1}" + (f" ({self.rack_names[z]})" if self.rack_names else "")

    def slots(self) -> list[Slot]:
        """All slots in rank order."""
        return sorted((slot for host in self.hosts for slot in host.slots), key=lambda s: s.rank)


def rank_of(dims: Dims, learner: int, host_index: int) -> int:
    """rank_gen's rank for local learner ``learner`` on host ``host_index`` (= z·Y + y)."""
    z, y = divmod(host_index, dims.y)
    return learner * (dims.y * dims.z) + y * dims.z + z


def _sockets_of_learners(facts: HostFacts, learners: int, use_gpu_affinity: bool) -> tuple[list[int], str]:
    sockets = facts.cpu.socket_count
    gpus = sorted(facts.gpus, key=lambda g: g.index)[:learners]
    if use_gpu_affinity and len(gpus) == learners and all(g.socket is not None for g in gpus):
        for gpu in gpus:
            if not 0 <= gpu.socket < sockets:
                raise PlanError(
                    f"host {facts.host}: GPU {gpu.index} is on socket {gpu.socket}, but the host has sockets 0-{sockets - 1}"
                )
        return [g.socket for g in gpus], RULE_GPU
    if learners <= sockets:
        return list(range(learners)), RULE_RANK_GEN
    if learners % sockets:
        raise PlanError(
            f"host {facts.host}: {learners} learners cannot be spread evenly over {sockets} sockets "
            f"(X must be at most the sockets, or a multiple of them)"
        )
    per_socket = learners // sockets
    return [x // per_socket for x in range(learners)], RULE_RANK_GEN


def _check_cores_exist(facts: HostFacts, slot: Slot) -> None:
    """Raise :class:`PlanError` unless every core of ``slot`` is a usable core of its socket."""
    have = {core.index for core in facts.cpu.sockets[slot.socket].cores}
    for core in range(slot.first_core, slot.last_core + 1):
        if core not in have:
            raise PlanError(
                f"host {facts.host}: socket {slot.socket} has no core {core} (its cores are numbered "
                f"{', '.join(map(str, sorted(have)))}); the facts are inconsistent, probe the host again"
            )


def plan_host(
    facts: HostFacts, dims: Dims, host_index: int, *, allow_no_gpu: bool = False, use_gpu_affinity: bool = True
) -> HostPlan:
    """Slots for one host from its own facts; raises :class:`PlanError` naming host and numbers."""
    if dims.x > len(facts.gpus) and not allow_no_gpu:
        raise PlanError(
            f"host {facts.host}: {dims.x} learners per host but {len(facts.gpus)} GPU(s) found "
            f"(use --allow-no-gpu for CPU-only runs)"
        )
    socket_of, rule = _sockets_of_learners(facts, dims.x, use_gpu_affinity)
    learners_on = Counter(socket_of)
    placed: Counter = Counter()
    slots = []
    z, y = divmod(host_index, dims.y)
    for learner, socket_index in enumerate(socket_of):
        cores = len(facts.cpu.sockets[socket_index].cores)
        share = cores // learners_on[socket_index]
        if share < 1:
            raise PlanError(
                f"host {facts.host}: socket {socket_index} has {cores} usable core(s) for {learners_on[socket_index]} learners"
            )
        first = placed[socket_index] * share
        placed[socket_index] += 1
        slot = Slot(rank_of(dims, learner, host_index), facts.host, learner, socket_index, first, first + share - 1)
        _check_cores_exist(facts, slot)  # never a core the host does not have (a real check: not an assert)
        slots.append(slot)
    return HostPlan(facts.host, host_index, z, y, rule, tuple(slots))


def topology_differences(facts_list: list[HostFacts]) -> list[str]:
    """Warnings naming hosts whose sockets×cores×threads or GPU count differ from the first host."""
    if not facts_list:
        return []
    reference = facts_list[0]
    warnings = []
    for facts in facts_list[1:]:
        if facts.cpu.shape() != reference.cpu.shape() or len(facts.gpus) != len(reference.gpus):
            warnings.append(
                f"host {facts.host} is {facts.cpu.shape()} with {len(facts.gpus)} GPU(s), host {reference.host} is "
                f"{reference.cpu.shape()} with {len(reference.gpus)}: each host's slots come from its own facts"
            )
    return warnings


def plan_rankfile(
    dims: Dims,
    facts_list: list[HostFacts],
    *,
    allow_no_gpu: bool = False,
    use_gpu_affinity: bool = True,
    racks: Sequence[Rack] = (),
) -> RankPlan:
    """The whole rank file for ``facts_list`` (hosts rack by rack). Validates before anything is written.

    ``racks``: the inventory's racks; when the hosts are in them, Y and Z must follow them
    (:func:`provision.plans.dims.rack_names`)."""
    if len(facts_list) != dims.hosts:
        raise PlanError(
            f"dims {dims} need Y·Z = {dims.hosts} hosts, got {len(facts_list)}: {some_names(f.host for f in facts_list)}; "
            f"choose which with --hosts h1,h2,... ({dims.hosts} names, rack by rack) or change Y·Z"
        )
    names = [facts.host for facts in facts_list]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise PlanError(f"host(s) listed twice: {', '.join(duplicates)}")
    inventory_racks = rack_names(dims, names, racks)
    hosts = tuple(
        plan_host(facts, dims, index, allow_no_gpu=allow_no_gpu, use_gpu_affinity=use_gpu_affinity)
        for index, facts in enumerate(facts_list)
    )
    warnings = topology_differences(facts_list)
    for facts in facts_list:
        if facts.hostname != facts.host:
            warnings.append(f"host {facts.host} calls itself {facts.hostname}: mpirun must resolve {facts.host} to it")
    return RankPlan(dims, hosts, tuple(facts_list), tuple(warnings), inventory_racks)


def some_names(names, shown: int = 8) -> str:
    """``a, b, c`` or ``a, ..., h and 12 more``: bounded for thousands of hosts."""
    names = list(names)
    return ", ".join(names) if len(names) <= shown else f"{', '.join(names[:shown])} and {len(names) - shown} more"


def render_rankfile(plan: RankPlan, generated_at: str) -> str:
    """The rank file text: rank_gen's header (plus provenance), then one block per host."""
    shapes = {(f.cpu.socket_count, f.cpu.cores_per_socket) for f in plan.facts}
    sockets, cores = shapes.pop() if len(shapes) == 1 else ("varies", "varies")
    rules = sorted({host.rule for host in plan.hosts})
    return render(
        "rankfile.j2",
        generated_at=generated_at,
        version=__version__,
        plan=plan,
        sockets=sockets,
        cores="varies" if cores is None else cores,
        rules=rules,
    )
