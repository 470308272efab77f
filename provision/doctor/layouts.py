"""The distinct node layouts of a run (``doctor --json``'s ``layouts``) and the picture of each.

Nodes share a layout when `provision topology` would draw them alike: the same arch, the same
usable cores on each socket, the same SMT mode, the same GPUs on the same sockets. Each layout
keeps the facts of its first node, cut to what the picture needs (facts format 1: ``cpu``,
``gpus``; :meth:`HostFacts.from_dict` reads it back), so a report drawn later from the saved
JSON draws the same picture: one rank per GPU (per socket where there is none), as
``provision topology Xx1x1`` binds them (:func:`provision.plans.picture.svg`).

>>> from provision.facts.model import Core, CpuTopology, HostFacts, Socket
>>> cpu = CpuTopology((Socket(0, 0, (0,), (Core(0, 0, (0,)), Core(1, 1, (1,)))),), 1, "lscpu")
>>> [entry["hosts"] for entry in node_layouts([HostFacts("a", "a", "x86_64", cpu), HostFacts("b", "b", "x86_64", cpu)])]
[['a', 'b']]
"""

from __future__ import annotations

from dataclasses import asdict

from provision.errors import PlanError
from provision.facts.model import FACTS_FORMAT, HostFacts
from provision.plans.dims import Dims
from provision.plans.picture import svg
from provision.plans.rankfile import plan_rankfile

# A layout larger than this is not drawn (a hand-edited JSON could ask for millions of cores).
MOST_CORES = 4096
MOST_GPUS = 64


def layout_key(facts: HostFacts) -> tuple:
    """What the picture shows of a node: arch, SMT mode, each socket's usable cores, each GPU's socket and model."""
    sockets = tuple(tuple(core.index for core in socket.cores) for socket in facts.cpu.sockets)
    gpus = tuple((gpu.index, gpu.socket, gpu.name) for gpu in sorted(facts.gpus, key=lambda g: g.index))
    return (facts.arch, facts.cpu.threads_per_core, sockets, gpus)


def node_layouts(facts_list: list[HostFacts]) -> list[dict]:
    """One entry per distinct layout, in the order its first node comes: the hosts that have it,
    arch, ``sockets x cores x threads``, GPU count and models, and the first node's facts (cut)."""
    groups: dict[tuple, list[HostFacts]] = {}
    for facts in facts_list:
        groups.setdefault(layout_key(facts), []).append(facts)
    entries = []
    for members in groups.values():
        first = members[0]
        entries.append(
            {
                "hosts": [facts.host for facts in members],
                "arch": first.arch,
                "shape": first.cpu.shape(),
                "gpus": len(first.gpus),
                "gpu_models": sorted({gpu.name for gpu in first.gpus}),
                "facts": {
                    "format": FACTS_FORMAT,
                    "host": first.host,
                    "hostname": first.hostname,
                    "arch": first.arch,
                    "cpu": asdict(first.cpu),
                    "gpus": [asdict(gpu) for gpu in first.gpus],
                    "openmpi": asdict(first.openmpi),
                },
            }
        )
    return entries


def layout_picture(entry: dict) -> str:
    """The SVG of one ``layouts`` entry (no XML declaration: it goes inside a page); raises
    :class:`ValueError` saying why it cannot be drawn (facts that do not read back, a layout too
    large, one the planner refuses)."""
    try:
        facts = HostFacts.from_dict(entry["facts"])
        cores = sum(len(socket.cores) for socket in facts.cpu.sockets)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"its facts do not read back ({type(error).__name__}: {error})"[:200]) from None
    if not _well_typed(facts):
        raise ValueError("its facts do not read back (a number or a name of the wrong type)")
    if not facts.cpu.sockets or cores > MOST_CORES or len(facts.gpus) > MOST_GPUS:
        raise ValueError(f"{len(facts.cpu.sockets)} sockets, {cores} cores, {len(facts.gpus)} GPUs: not drawn")
    learners = len(facts.gpus) or facts.cpu.socket_count
    try:
        plan = plan_rankfile(Dims(learners, 1, 1), [facts], allow_no_gpu=True)
        picture = svg(plan)
    except PlanError as error:
        raise ValueError(str(error)[:200]) from None
    return picture.split("?>", 1)[1].lstrip() if picture.startswith("<?xml") else picture


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _well_typed(facts: HostFacts) -> bool:
    """The fields the picture reads have their types (a saved JSON is a file anyone could have edited)."""
    cpu = facts.cpu
    return (
        isinstance(facts.host, str)
        and _whole(cpu.threads_per_core)
        and isinstance(cpu.source, str)
        and all(_whole(s.index) and all(_whole(c.index) for c in s.cores) for s in cpu.sockets)
        and all(
            _whole(g.index) and (g.socket is None or _whole(g.socket)) and isinstance(g.name, str) and isinstance(g.bus_id, str)
            for g in facts.gpus
        )
    )
