"""How doctor's checks compare nodes: the majority and who differs from it, the worst status, the
nodes that answered, a host list that stays one line; :func:`compare` builds a whole check from
"every node shows the same value of each of these".

    >>> majority({"n1": "12.4", "n2": "12.4", "n3": "12.2"})
    ('12.4', ['n3'])
    >>> hosts_list([f"n{i}" for i in range(1, 9)])
    'n1, n2, n3, n4, n5, n6 and 2 more'
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping

from provision.doctor.model import FAIL, PASS, SEVERITY, CheckResult, NodeReport


def majority(values: dict[str, Hashable]) -> tuple[Hashable, list[str]]:
    """The most common value (the first node's on a tie) and the hosts that differ from it."""
    if not values:
        return None, []
    counts = Counter(values.values())
    top = max(counts.values())
    winner = next(v for v in values.values() if counts[v] == top)
    return winner, [host for host, value in values.items() if value != winner]


def worst(statuses: list[str]) -> str:
    """The most severe of ``statuses`` (FAIL over WARN over PASS); PASS when there are none."""
    return max(statuses, key=SEVERITY.__getitem__, default=PASS)


def answered(reports: list[NodeReport]) -> list[NodeReport]:
    """The reports of the nodes that were reached and read (an unreachable node fails check 1 only)."""
    return [r for r in reports if r.ok]


def hosts_list(hosts: list[str], limit: int = 6) -> str:
    """The first ``limit`` hosts and how many more: a line stays one line at any cluster size."""
    return ", ".join(hosts[:limit]) + (f" and {len(hosts) - limit} more" if len(hosts) > limit else "")


def compare(
    name: str,
    reports: list[NodeReport],
    what: dict[str, Callable[[NodeReport], str]],
    status: str = FAIL,
    statuses: Mapping[str, str] | None = None,
) -> CheckResult:
    """A check that every node shows the same value of each ``what`` (absent: ``none``); a mix
    names the minority, what it has and what the others have. A difference in a label earns
    ``statuses[label]`` where given, else ``status``; the check the worst of them, each node its own."""
    reached = answered(reports)
    problems, shown = [], []
    nodes: dict[str, str] = {}  # host -> what differs there
    earned: dict[str, list[str]] = {}  # host -> the status of each difference there
    for label, value_of in what.items():
        values = {r.host: value_of(r) or "none" for r in reached}
        if set(values.values()) <= {"none"}:
            continue
        common, odd = majority(values)
        shown.append(f"{label} {common}")
        if odd:
            groups: dict[str, list[str]] = {}
            for host in odd:
                groups.setdefault(values[host], []).append(host)
                said = f"{label} {values[host]} (the others {common})"
                nodes[host] = f"{nodes[host]}; {said}" if host in nodes else said
                earned.setdefault(host, []).append((statuses or {}).get(label, status))
            problems.append(
                f"{label}: " + "; ".join(f"{value} on {hosts_list(h)}" for value, h in groups.items()) + f"; the others {common}"
            )
    if problems:
        overall = worst([s for found in earned.values() for s in found])
        milder = {host: worst(found) for host, found in earned.items() if worst(found) != overall}
        return CheckResult(name, overall, tuple(nodes), "; ".join(problems), nodes=nodes, node_status=milder)
    return CheckResult(name, PASS, (), ("same on every node: " + ", ".join(shown)) if shown else "nothing to compare")
