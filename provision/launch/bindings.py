"""Where mpirun says it bound each rank (``--report-bindings``), checked against the rank plan.

OpenMPI 4 (ORTE) and OpenMPI 5 (PRRTE) print the report in different shapes::

    [node1:00123] MCW rank 0 bound to socket 0[core 1[hwt 0]], socket 0[core 2[hwt 0]]: [./B/B]
    [m51:00057] Rank 0 bound to package[0][core:0-1]

Both name hwloc's logical package and core indexes (the numbering of ``slot=S:C`` in a rank file).
The output is hostile text from the nodes: lines are matched whole, numbers bounded, unknown lines
ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from provision.plans.rankfile import RankPlan

_V4 = re.compile(
    r"^\[([\w.-]{1,253}):\d{1,10}\] MCW rank (\d{1,9}) (?:bound to ((?:socket \d{1,5}\[core \d{1,6}\[hwt [\d,-]{1,40}\]\],? ?){1,4096})|is not bound)"  # noqa: E501 - one literal, kept whole to be read or grepped
)
_V4_CORE = re.compile(r"socket (\d+)\[core (\d+)\[")
_V5 = re.compile(
    r"^\[([\w.-]{1,253}):\d{1,10}\] Rank (\d{1,9}) (?:bound to ((?:package\[\d{1,5}\]\[core:[\d,-]{1,4000}\]\s?){1,64})|is not bound)"  # noqa: E501 - one literal, kept whole to be read or grepped
)
_V5_PACKAGE = re.compile(r"package\[(\d+)\]\[core:([\d,-]+)\]")
MAX_CORES = 1 << 16


@dataclass(frozen=True)
class Binding:
    """One rank as mpirun reported it: the node's name and its (package, core) pairs.

    Empty ``cores``: "not bound (or bound to all available processors)", which is how OpenMPI
    reports a rank whose binding is the whole node."""

    host: str
    rank: int
    cores: tuple[tuple[int, int], ...]


def _core_list(text: str) -> list[int]:
    cores: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            return []
        low, high = int(first), int(last or first)
        if high < low or high - low > MAX_CORES:
            return []
        cores.extend(range(low, high + 1))
    return cores


def parse_binding_line(line: str) -> Binding | None:
    """A :class:`Binding` from one ``--report-bindings`` line of OpenMPI 4 or 5, else None."""
    line = line.strip()
    if match := _V4.match(line):
        pairs = {(int(s), int(c)) for s, c in _V4_CORE.findall(match.group(3) or "")}
        return Binding(match.group(1), int(match.group(2)), tuple(sorted(pairs)))
    if match := _V5.match(line):
        pairs = {
            (int(package), core) for package, cores in _V5_PACKAGE.findall(match.group(3) or "") for core in _core_list(cores)
        }
        return Binding(match.group(1), int(match.group(2)), tuple(sorted(pairs)))
    return None


def check_bindings(plan: RankPlan, bindings: dict[int, Binding]) -> list[str]:
    """One line per rank that is missing, on another host or bound to other cores than planned."""
    names = {
        facts.host: {facts.host, facts.hostname or facts.host, (facts.hostname or facts.host).split(".")[0]}
        for facts in plan.facts
    }
    whole_node = {
        facts.host: [(0, core) for core in range(len(facts.cpu.sockets[0].cores))]
        for facts in plan.facts
        if facts.cpu.socket_count == 1
    }
    problems = []
    for slot in plan.slots():
        planned = [(slot.socket, core) for core in range(slot.first_core, slot.last_core + 1)]
        got = bindings.get(slot.rank)
        where = f"{slot.host} {slot.slot_text()}"
        if got is None:
            problems.append(f"rank {slot.rank}: no binding reported (planned {where})")
        elif got.host not in names.get(slot.host, {slot.host}):
            problems.append(f"rank {slot.rank}: ran on {got.host}, planned {where}")
        elif list(got.cores) != planned and not (not got.cores and whole_node.get(slot.host) == planned):
            shown = (
                "bound to " + ", ".join(f"{s}:{c}" for s, c in got.cores[:16])
                if got.cores
                else "not bound (or bound to the whole node)"
            )
            problems.append(f"rank {slot.rank}: {shown} on {got.host}, planned {where}")
    return problems
