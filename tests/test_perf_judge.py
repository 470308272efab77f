"""Judging links against their peers (provision.doctor.perf_judge): a bad node, a bad link, a slow
link that cannot be placed, failed tests; the thresholds and the coverage always said."""

from __future__ import annotations

import itertools

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
