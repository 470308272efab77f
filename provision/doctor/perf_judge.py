"""Judge pairwise performance against the cluster's own links, not a spec sheet (pure).

Each link is compared with the median of the measured links of the same kind (``tcp eth0``,
``rdma mlx5_0:1``...): below ``SLOW`` times that median it is slow. A node slow with (nearly)
every peer it was tested with is a **bad node**; a slow link whose two nodes are fine with their
other peers is a **bad link**. A node in a bad node's slow links is not blamed for them: the
median is taken again without the bad nodes' links, so one slow node in a small cluster does not
drag the reference down for everyone.

>>> links = [Link("tcp eth0", a, b, 10.0) for a, b in [("n1", "n2"), ("n1", "n3"), ("n2", "n3")]]
>>> judge_kind("tcp eth0", links, 3).status
'pass'
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass

from provision.doctor.model import FAIL, PASS, WARN, CheckResult, LinkFinding

SLOW = 0.5  # a link below half the median of its kind is slow
NODE = 0.75  # a node slow with at least this share of its tested peers (and at least 2) is a bad node


@dataclass(frozen=True)
class Link:
    """One pair's test: ``gbps`` the slower direction (None when the test failed, ``error`` says why)."""

    kind: str
    a: str  # the node that ran the client
    b: str  # the node that ran the server
    gbps: float | None
    forward_gbps: float | None = None  # a -> b
    reverse_gbps: float | None = None  # b -> a
    rtt_us: float | None = None  # the lowest TCP round trip seen in the test (its latency figure)
    latency_us: float | None = None  # RDMA: ib_write_lat's typical one-way latency (half its round trip)
    error: str = ""

    @property
    def pair(self) -> str:
        return f"{self.a}-{self.b}"


@dataclass(frozen=True)
class Coverage:
    """What the rounds covered: pairs tested of the pairs there are, rounds run of rounds planned."""

    pairs_tested: int
    pairs_total: int
    rounds_run: int
    rounds_planned: int
    budget_s: float | None  # None: no budget
    stopped_by_budget: bool = False

    def to_dict(self) -> dict:
        """The ``--json`` form: every field, by name."""
        return {
            "pairs_tested": self.pairs_tested,
            "pairs_total": self.pairs_total,
            "rounds_run": self.rounds_run,
            "rounds_planned": self.rounds_planned,
            "budget_s": self.budget_s,
            "stopped_by_budget": self.stopped_by_budget,
        }

    def line(self) -> str:
        """``covered 10 of 10 pairs in 5 of 5 rounds (budget 60s)``."""
        text = f"covered {self.pairs_tested} of {self.pairs_total} pairs in {self.rounds_run} of {self.rounds_planned} rounds"
        if self.budget_s is not None:
            text += f" (budget {self.budget_s:g}s{': stopped there' if self.stopped_by_budget else ''})"
        return text


@dataclass(frozen=True)
class Verdict:
    """What judging one kind found (also used by `launch` to leave nodes out)."""

    median: float | None
    threshold: float | None
    bad_nodes: dict[str, str]  # host -> why
    bad_links: dict[tuple[str, str], str]  # (a, b) -> why
    unsure: dict[tuple[str, str], str]  # slow links that cannot be put on a node or a link


def _gbps(value: float) -> str:
    return f"{value:.3g} Gbit/s"


def decide(links: list[Link], slow: float = SLOW, node_share: float = NODE) -> Verdict:
    """Bad nodes and bad links among ``links`` (all of one kind); failed tests are not judged here.

    Linear in the links: each node's links are listed once (:func:`_by_node`), and every count
    below is read from those lists, never by scanning all links for each node or each slow link
    (that was O(nodes x links) and took seconds at 256 nodes: issue 37)."""
    measured = [link for link in links if link.gbps is not None]
    if not measured:
        return Verdict(None, None, {}, {}, {})
    by_node = _by_node(measured)
    median = statistics.median(link.gbps for link in measured)
    bad_nodes = _bad_nodes(by_node, slow * median, node_share)
    if bad_nodes:  # the reference again without the bad nodes' links
        rest = [link for link in measured if link.a not in bad_nodes and link.b not in bad_nodes]
        if rest:
            median = statistics.median(link.gbps for link in rest)
            bad_nodes = _bad_nodes(by_node, slow * median, node_share) or bad_nodes
    threshold = slow * median
    slow_links = [link for link in measured if link.gbps < threshold]
    # Per node, its links with no bad node at either end ("fair"), and how many of them are slow.
    fair = {node: [link for link in own if link.a not in bad_nodes and link.b not in bad_nodes] for node, own in by_node.items()}
    fair_slow = {node: sum(1 for link in own if link.gbps < threshold) for node, own in fair.items()}
    copies = Counter(id(link) for link in slow_links)  # the same test listed twice counts as one
    bad_links: dict[tuple[str, str], str] = {}
    unsure: dict[tuple[str, str], str] = {}
    for link in slow_links:
        if link.a in bad_nodes or link.b in bad_nodes:
            continue
        # Fine elsewhere: the node has other fair links, and none of them is slow (this one is).
        fine_elsewhere = [len(fair[node]) > copies[id(link)] and fair_slow[node] == copies[id(link)] for node in (link.a, link.b)]
        why = f"{_gbps(link.gbps)} ({_direction(link)})"
        if all(fine_elsewhere):
            bad_links[(link.a, link.b)] = why
        else:
            unsure[(link.a, link.b)] = why + "; not enough other tests of these nodes to tell a bad node from a bad link"
    return Verdict(median, threshold, bad_nodes, bad_links, unsure)


def verdicts_by_kind(links: list[Link]) -> dict[str, Verdict]:
    """Each kind of link among ``links`` -> :func:`decide` of its links: judged once per run, and
    that one verdict is what the checks, ``--json``'s document and ``--drain`` read.

    >>> sorted(verdicts_by_kind([Link("tcp eth0", "a", "b", 9.0), Link("rdma mlx5_0:1", "a", "b", 90.0)]))
    ['rdma mlx5_0:1', 'tcp eth0']
    """
    kinds: dict[str, list[Link]] = {}
    for link in links:
        kinds.setdefault(link.kind, []).append(link)
    return {kind: decide(kind_links) for kind, kind_links in kinds.items()}


def _by_node(measured: list[Link]) -> dict[str, list[Link]]:
    """Each node (sorted) -> the links it is an end of (a link of a node with itself: once)."""
    by_node: dict[str, list[Link]] = {}
    for link in measured:
        by_node.setdefault(link.a, []).append(link)
        if link.b != link.a:
            by_node.setdefault(link.b, []).append(link)
    return dict(sorted(by_node.items()))


def _bad_nodes(by_node: dict[str, list[Link]], threshold: float, node_share: float) -> dict[str, str]:
    bad: dict[str, str] = {}
    for node, tested in by_node.items():
        slow = [link.gbps for link in tested if link.gbps < threshold]
        if len(tested) >= 2 and len(slow) >= max(2, math.ceil(node_share * len(tested))):
            bad[node] = f"slow with {len(slow)} of {len(tested)} peers (median {_gbps(statistics.median(slow))})"
    return bad


def _direction(link: Link) -> str:
    if link.forward_gbps is None or link.reverse_gbps is None:
        return "one direction measured"
    return f"{link.a}->{link.b} {_gbps(link.forward_gbps)}, {link.b}->{link.a} {_gbps(link.reverse_gbps)}"


def _shown(items: list[str], limit: int = 6) -> str:
    return "; ".join(items[:limit]) + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def judge_kind(
    kind: str, links: list[Link], nodes: int, coverage: Coverage | None = None, verdict: Verdict | None = None
) -> CheckResult:
    """One check for one kind of link: fail on a bad node, a bad link, a slow link that cannot be
    placed, or a test that failed; the median, the threshold and the coverage always said
    (``verdict``: :func:`decide` of ``links`` when the caller has it already)."""
    name = f"perf {kind}"
    verdict = decide(links) if verdict is None else verdict
    failed = [link for link in links if link.gbps is None]
    measured = [link for link in links if link.gbps is not None]
    parts: list[str] = []
    hosts: list[str] = []
    if verdict.median is not None:
        parts.append(
            f"median {_gbps(verdict.median)} over {len(measured)} links; slow below {SLOW:.0%} of it ({_gbps(verdict.threshold)})"
        )
        rtts = [link.rtt_us for link in measured if link.rtt_us is not None]
        if rtts:
            parts.append(f"latency (lowest TCP round trip) median {statistics.median(rtts):.0f} us, highest {max(rtts):.0f} us")
        one_way = [link.latency_us for link in measured if link.latency_us is not None]
        if one_way:
            typical = statistics.median(one_way)
            parts.append(f"latency (ib_write_lat, typical one-way) median {typical:.3g} us, highest {max(one_way):.3g} us")
    problems: list[str] = []
    found: list[LinkFinding] = []
    by_pair = {(link.a, link.b): link for link in measured}
    for node, why in verdict.bad_nodes.items():
        problems.append(f"bad node {node}: {why}")
        hosts.append(node)
    for (a, b), why in verdict.bad_links.items():
        problems.append(f"bad link {a}-{b}: {why}; both nodes are fine with their other peers")
        hosts += [a, b]
        found.append(_finding(by_pair[(a, b)], "bad link", why))
    for (a, b), why in verdict.unsure.items():
        problems.append(f"slow link {a}-{b}: {why}")
        hosts += [a, b]
        found.append(_finding(by_pair[(a, b)], "slow link", why))
    for link in failed:
        problems.append(f"{link.pair}: {link.error}")
        hosts += [link.a, link.b]
        found.append(_finding(link, "test failed", link.error))
    if coverage is not None:
        parts.append(coverage.line())
    status = FAIL if problems else PASS  # partial coverage is said, not failed: the budget asked for it
    if not measured and not failed and nodes > 1:
        status, parts = WARN, ["no pair tested"] + parts
    detail = "; ".join(([_shown(problems)] if problems else []) + parts)
    thresholds = {"slow_share": SLOW, "node_share": NODE}
    if verdict.median is not None:
        thresholds |= {"median_gbps": round(verdict.median, 3), "slow_below_gbps": round(verdict.threshold, 3)}
    return CheckResult(
        name,
        status,
        tuple(dict.fromkeys(hosts)),
        detail,
        nodes={node: f"bad node: {why}" for node, why in verdict.bad_nodes.items()},
        links=tuple(found),
        thresholds=thresholds,
        coverage=coverage.to_dict() if coverage is not None else None,
    )


def _finding(link: Link, verdict: str, why: str) -> LinkFinding:
    return LinkFinding(link.a, link.b, verdict, why, link.gbps, link.forward_gbps, link.reverse_gbps)
