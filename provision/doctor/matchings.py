"""Rounds of pairs for doctor --perf: each round a matching (every node in at most one pair), so
all of a round's pairs can run at once without one node's link being shared.

The round-robin circle method gives every pair exactly once in N-1 rounds (N for odd N, one node
resting each round); a large cluster can instead be sampled with K random matchings; pairs that
need a second test are packed greedily into as few rounds as that gives.

>>> circle_rounds(["a", "b", "c", "d"])
[[('a', 'd'), ('b', 'c')], [('c', 'a'), ('d', 'b')], [('a', 'b'), ('c', 'd')]]
"""

from __future__ import annotations

import random

Pair = tuple[str, str]  # (client, server): the first node runs the client


def circle_rounds(nodes: list[str]) -> list[list[Pair]]:
    """Every pair once, in N-1 matchings (N for odd N): the first node stays, the rest rotate.
    The first of a pair runs the client, the second the server (which a firewall would stop);
    every node is each in some of its pairs."""
    ring = list(nodes) + ([None] if len(nodes) % 2 else [])
    rounds = []
    for number in range(len(ring) - 1):
        half = len(ring) // 2
        pairs = [(ring[i], ring[-1 - i]) for i in range(half)]
        if number % 2:  # the fixed node serves every other round: each node takes connections too
            pairs[0] = (pairs[0][1], pairs[0][0])
        rounds.append([(a, b) for a, b in pairs if a is not None and b is not None])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return [r for r in rounds if r]


def random_rounds(nodes: list[str], count: int, rng: random.Random) -> list[list[Pair]]:
    """``count`` random perfect matchings (one node rests in each when N is odd)."""
    rounds = []
    for _ in range(count):
        order = list(nodes)
        rng.shuffle(order)
        rounds.append([(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)])
    return rounds


def greedy_matchings(pairs: list[Pair]) -> list[list[Pair]]:
    """``pairs`` in as few rounds as a greedy pass gives, each round a matching.

    >>> greedy_matchings([("a", "b"), ("a", "c"), ("d", "e")])
    [[('a', 'b'), ('d', 'e')], [('a', 'c')]]
    """
    rounds: list[list[Pair]] = []
    for pair in pairs:
        for matching in rounds:
            if not {n for p in matching for n in p} & set(pair):
                matching.append(pair)
                break
        else:
            rounds.append([pair])
    return rounds
