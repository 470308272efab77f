"""Judging links against their peers (provision.doctor.perf_judge): a bad node, a bad link, a slow
link that cannot be placed, failed tests; the thresholds and the coverage always said."""

from __future__ import annotations

import dataclasses
import itertools

from hypothesis import given, settings, strategies as st

from provision.doctor.perf_judge import Coverage, Link, decide, judge_kind

KIND = "tcp eth0"
NODES = ["n1", "n2", "n3", "n4", "n5"]


def _links(speeds: dict[frozenset, float], nodes=NODES, default: float = 10.0) -> list[Link]:
    return [Link(KIND, a, b, speeds.get(frozenset((a, b)), default), rtt_us=50.0) for a, b in itertools.combinations(nodes, 2)]


def test_a_uniform_cluster_passes_and_says_its_figures():
    result = judge_kind(KIND, _links({}), 5, Coverage(10, 10, 5, 5, None))
    assert result.status == "pass" and result.hosts == ()
    assert result.detail == (
        "median 10 Gbit/s over 10 links; slow below 50% of it (5 Gbit/s); "
        "latency (lowest TCP round trip) median 50 us, highest 50 us; covered 10 of 10 pairs in 5 of 5 rounds"
    )


def test_a_node_slow_with_every_peer_is_a_bad_node_not_four_bad_links():
    slow = {frozenset(("n3", peer)): 0.1 for peer in NODES if peer != "n3"}
    result = judge_kind(KIND, _links(slow), 5)
    assert result.status == "fail" and result.hosts == ("n3",)
    assert result.detail.startswith("bad node n3: slow with 4 of 4 peers (median 0.1 Gbit/s)")
    assert "bad link" not in result.detail


def test_in_four_nodes_a_bad_node_does_not_drag_the_reference_down():
    nodes = NODES[:4]  # half the links are the bad node's: the median alone would sit between
    slow = {frozenset(("n2", peer)): 0.1 for peer in nodes if peer != "n2"}
    verdict = decide(_links(slow, nodes))
    assert list(verdict.bad_nodes) == ["n2"] and verdict.median == 10.0 and verdict.threshold == 5.0
    assert verdict.bad_links == {} and verdict.unsure == {}


def test_a_nearly_bad_node_still_counts_one_fine_peer_of_five():
    nodes = [f"n{i}" for i in range(1, 7)]
    slow = {frozenset(("n1", peer)): 0.5 for peer in nodes[1:5]}  # slow with 4 of 5
    assert list(decide(_links(slow, nodes)).bad_nodes) == ["n1"]


def test_a_slow_pair_whose_nodes_are_fine_elsewhere_is_a_bad_link():
    link = Link(KIND, "n2", "n4", 0.2, 0.2, 9.0)
    links = [x for x in _links({}) if {x.a, x.b} != {"n2", "n4"}] + [link]
    result = judge_kind(KIND, links, 5)
    assert result.status == "fail" and result.hosts == ("n2", "n4")
    assert result.detail.startswith(
        "bad link n2-n4: 0.2 Gbit/s (n2->n4 0.2 Gbit/s, n4->n2 9 Gbit/s); both nodes are fine with their other peers"
    )


def test_a_slow_link_between_nodes_tested_nowhere_else_is_not_blamed_on_either():
    links = [Link(KIND, "n1", "n2", 0.1), Link(KIND, "n3", "n4", 10.0), Link(KIND, "n5", "n6", 10.0)]
    result = judge_kind(KIND, links, 6)
    assert result.status == "fail" and result.hosts == ("n1", "n2")
    assert "slow link n1-n2: 0.1 Gbit/s" in result.detail and "not enough other tests" in result.detail


def test_failed_tests_fail_the_check_and_name_the_pair():
    links = _links({})[:-1] + [Link(KIND, "n4", "n5", None, error="n5 refused the test port 47201")]
    result = judge_kind(KIND, links, 5)
    assert result.status == "fail" and result.hosts == ("n4", "n5")
    assert result.detail.startswith("n4-n5: n5 refused the test port 47201; median 10 Gbit/s over 9 links")


def test_nothing_tested_warns():
    assert judge_kind(KIND, [], 3).status == "warn"


def test_a_cut_budget_says_so_without_failing():
    coverage = Coverage(4, 10, 2, 5, 8.0, stopped_by_budget=True)
    result = judge_kind(KIND, _links({})[:4], 5, coverage)
    assert result.status == "pass"
    assert result.detail.endswith("covered 4 of 10 pairs in 2 of 5 rounds (budget 8s: stopped there)")


# Issue 37: `doctor --json` for 256 nodes took ~21 s, in decide() called three times per kind of
# link, each O(nodes x links). Now one call per kind per run, linear in the links, and the same verdicts.


def _decide_before(links: list[Link], slow: float = 0.5, node_share: float = 0.75):
    """decide() as it was (O(nodes x links)): the specification the linear one must match."""
    import math
    import statistics

    from provision.doctor.perf_judge import Verdict, _direction, _gbps

    def bad_nodes_of(measured, slow_links):
        bad = {}
        for node in sorted({n for link in measured for n in (link.a, link.b)}):
            tested = [link for link in measured if node in (link.a, link.b)]
            slow_ones = [link for link in slow_links if node in (link.a, link.b)]
            if len(tested) >= 2 and len(slow_ones) >= max(2, math.ceil(node_share * len(tested))):
                figure = statistics.median(link.gbps for link in slow_ones)
                bad[node] = f"slow with {len(slow_ones)} of {len(tested)} peers (median {_gbps(figure)})"
        return bad

    def fine_with_others(node, slow_link, measured, threshold):
        others = [link for link in measured if node in (link.a, link.b) and link is not slow_link]
        return bool(others) and all(link.gbps >= threshold for link in others)

    measured = [link for link in links if link.gbps is not None]
    if not measured:
        return Verdict(None, None, {}, {}, {})
    median = statistics.median(link.gbps for link in measured)
    slow_links = [link for link in measured if link.gbps < slow * median]
    bad = bad_nodes_of(measured, slow_links)
    if bad:
        rest = [link for link in measured if link.a not in bad and link.b not in bad]
        if rest:
            median = statistics.median(link.gbps for link in rest)
            slow_links = [link for link in measured if link.gbps < slow * median]
            bad = bad_nodes_of(measured, slow_links) or bad
    threshold = slow * median
    bad_links, unsure = {}, {}
    for link in slow_links:
        if link.a in bad or link.b in bad:
            continue
        fair = [other for other in measured if other.a not in bad and other.b not in bad]
        why = f"{_gbps(link.gbps)} ({_direction(link)})"
        if all(fine_with_others(node, link, fair, threshold) for node in (link.a, link.b)):
            bad_links[(link.a, link.b)] = why
        else:
            unsure[(link.a, link.b)] = why + "; not enough other tests of these nodes to tell a bad node from a bad link"
    return Verdict(median, threshold, bad, bad_links, unsure)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 7), st.integers(0, 7), st.sampled_from([None, 0.1, 0.2, 4.9, 5.0, 9.0, 10.0, 11.0])),
        max_size=40,
    ),
    st.lists(st.integers(0, 39), max_size=4),
)
def test_decide_gives_the_verdicts_it_gave_before(tests, repeated):
    # Any cluster: pairs tested once, twice or not at all, a node tested with itself, failed tests,
    # figures at the threshold; the same Link object listed twice (``repeated``) too.
    links = [Link(KIND, f"n{a}", f"n{b}", gbps) for a, b, gbps in tests]
    links += [links[index] for index in repeated if index < len(links)]
    assert decide(links) == _decide_before(links)


def test_decide_reads_each_link_a_bounded_number_of_times_whatever_the_cluster_size():
    # Linear, not O(nodes x links): the reads of a link's fields grow with the links, not faster.
    reads = [0]

    @dataclasses.dataclass(frozen=True)
    class Counted(Link):
        def __getattribute__(self, name):
            if name in ("a", "b", "gbps"):
                reads[0] += 1
            return object.__getattribute__(self, name)

    def reads_for(count: int) -> tuple[int, int]:
        nodes = [f"n{i}" for i in range(count)]
        slow = {frozenset(("n1", peer)): 0.1 for peer in nodes if peer != "n1"} | {frozenset(("n2", "n3")): 0.2}
        links = [Counted(KIND, a, b, slow.get(frozenset((a, b)), 10.0)) for a, b in itertools.combinations(nodes, 2)]
        reads[0] = 0
        verdict = decide(links)
        assert list(verdict.bad_nodes) == ["n1"] and list(verdict.bad_links) == [("n2", "n3")]
        return reads[0], len(links)

    small, small_links = reads_for(16)
    large, large_links = reads_for(128)
    assert large / large_links <= 1.2 * small / small_links  # quadratic: ~8x more reads per link at 8x the nodes
    assert large / large_links < 40


def test_a_doctor_run_judges_each_kind_of_link_once(monkeypatch):
    # The checks, the --json document and --drain's hosts at fault read one verdict per kind.
    from provision.doctor import perf_judge
    from provision.doctor.healthy import at_fault
    from provision.doctor.perf import PerfRun
    from provision.doctor.perf_rdma import RdmaRun
    from provision.doctor.report import document
    from provision.doctor.runner import DoctorRun

    calls = []
    real = perf_judge.decide
    monkeypatch.setattr(perf_judge, "decide", lambda links, *args: calls.append(links[0].kind) or real(links, *args))
    nodes = [f"n{i}" for i in range(1, 9)]
    pairs = list(itertools.combinations(nodes, 2))
    tcp = [Link("tcp eth0", a, b, 0.1 if "n3" in (a, b) else 10.0) for a, b in pairs]
    rails = [Link(f"rdma mlx5_{r}:1", a, b, 95.0) for r in (0, 1) for a, b in pairs]
    perf = PerfRun(tcp, Coverage(len(pairs), len(pairs), 7, 7, None), {}, "eth0", 1.0, RdmaRun(rails, {}, {}))
    results = perf.results(len(nodes))
    doc = document(results, nodes, perf=perf)
    unhealthy = at_fault(DoctorRun(results, [], {}, perf), nodes)
    assert sorted(calls) == ["rdma mlx5_0:1", "rdma mlx5_1:1", "tcp eth0"]
    assert [k["bad_nodes"] for k in doc["perf"]["kinds"]][0][0]["host"] == "n3" and list(unhealthy) == ["n3"]
