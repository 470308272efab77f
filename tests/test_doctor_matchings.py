"""doctor --perf's rounds (provision.doctor.matchings): every round a matching; the circle covers
every pair once, random rounds sample, the greedy packing retests in few rounds."""

from __future__ import annotations

import itertools
import random

import pytest

from provision.doctor.matchings import circle_rounds, greedy_matchings, random_rounds


@pytest.mark.parametrize("count", range(2, 18))
def test_the_circle_covers_every_pair_once_in_n_minus_1_rounds_of_matchings(count):
    nodes = [f"n{i}" for i in range(count)]
    rounds = circle_rounds(nodes)
    assert len(rounds) == (count - 1 if count % 2 == 0 else count)
    for matching in rounds:
        used = [n for pair in matching for n in pair]
        assert len(used) == len(set(used)) and len(matching) == count // 2  # a matching, as wide as it can be
    pairs = [frozenset(p) for m in rounds for p in m]
    assert sorted(pairs, key=sorted) == sorted((frozenset(p) for p in itertools.combinations(nodes, 2)), key=sorted)
    if count > 2:  # every node serves in some pair (a firewall on it is seen)
        assert {b for m in rounds for _, b in m} == set(nodes)


def test_random_rounds_are_matchings():
    rounds = random_rounds([f"n{i}" for i in range(7)], 4, random.Random(1))
    assert len(rounds) == 4
    for matching in rounds:
        used = [n for pair in matching for n in pair]
        assert len(used) == 6 == len(set(used))


def test_greedy_matchings_keep_the_order_and_never_put_a_node_twice_in_a_round():
    pairs = [("a", "b"), ("a", "c"), ("d", "e"), ("c", "b"), ("e", "a")]
    rounds = greedy_matchings(pairs)
    assert rounds == [[("a", "b"), ("d", "e")], [("a", "c")], [("c", "b"), ("e", "a")]]
    assert sorted(p for r in rounds for p in r) == sorted(pairs)
