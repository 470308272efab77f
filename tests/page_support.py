"""A ``doctor --json`` document of any size for the report page's tests and benchmark, written as
the schema gives it (docs/reference/doctor-json.md), without running the judge: N nodes in racks
of 16, every pair tested both ways around a median with noise, one bad node (p3: slow with every
peer), one bad link (p6-p5, one direction slow), one failed test (p8-p9); TCP with round trips,
and (``rdma=True``) one RDMA rail with one-way latencies."""

from __future__ import annotations

import random

from doctor_support import FACTS
from provision.doctor.layouts import node_layouts

BAD_NODE, BAD_LINK, FAILED = "p3", ("p6", "p5"), ("p8", "p9")


def _kind(kind: str, nodes: list[str], median: float, latency_key: str, rng: random.Random) -> tuple[dict, dict]:
    index = {node: i for i, node in enumerate(nodes)}
    matrix: list[list[float | None]] = [[None] * len(nodes) for _ in nodes]
    links = []
    for i, a in enumerate(nodes):
        for b in nodes[i + 1 :]:
            forward, reverse = median * rng.uniform(0.9, 1.1), median * rng.uniform(0.9, 1.1)
            verdict, error = "ok", None
            if BAD_NODE in (a, b):
                forward, reverse, verdict = median * 0.01, median * 0.011, "slow"
            elif {a, b} == set(BAD_LINK):
                forward, verdict = median * 0.012, "bad link"
            elif (a, b) == FAILED:
                forward = reverse = None
                verdict, error = "failed", "p9 refused the test port 47201 on 10.0.0.9 (Connection refused; a firewall?)"
            matrix[index[a]][index[b]] = None if forward is None else round(forward, 3)
            matrix[index[b]][index[a]] = None if reverse is None else round(reverse, 3)
            gbps = None if forward is None else round(min(forward, reverse), 3)
            link = {"a": a, "b": b, "verdict": verdict, "gbps": gbps, "forward_gbps": forward, "reverse_gbps": reverse}
            link |= {"rtt_us": None, "latency_us": None, "error": error}
            if gbps is not None:
                link[latency_key] = round(rng.uniform(30, 60) if latency_key == "rtt_us" else rng.uniform(1.5, 2.5), 3)
            links.append(link)
    bad_link = next(link for link in links if {link["a"], link["b"]} == set(BAD_LINK))
    failed = next(link for link in links if (link["a"], link["b"]) == FAILED)
    node_why = f"slow with {len(nodes) - 1} of {len(nodes) - 1} peers (median {median * 0.01:.3g} Gbit/s)"
    check = {
        "name": f"perf {kind}",
        "status": "fail",
        "hosts": [BAD_NODE, *BAD_LINK, *FAILED],
        "detail": f"bad node {BAD_NODE}: {node_why}; bad link {bad_link['a']}-{bad_link['b']}: slow",
        "bad_nodes": [{"host": BAD_NODE, "status": "fail", "why": f"bad node: {node_why}"}],
        "bad_links": [
            {
                "a": bad_link["a"],
                "b": bad_link["b"],
                "verdict": "bad link",
                "why": "slow; both nodes are fine with their other peers",
            }
            | {key: bad_link[key] for key in ("gbps", "forward_gbps", "reverse_gbps")},
            {"a": failed["a"], "b": failed["b"], "verdict": "test failed", "why": failed["error"]}
            | {"gbps": None, "forward_gbps": None, "reverse_gbps": None},
        ],
        "thresholds": {"slow_share": 0.5, "node_share": 0.75, "median_gbps": median, "slow_below_gbps": median / 2},
        "coverage": {
            "pairs_tested": len(links),
            "pairs_total": len(links),
            "rounds_run": len(nodes) - 1,
            "rounds_planned": len(nodes) - 1,
            "budget_s": None,
            "stopped_by_budget": False,
        },  # fmt: skip
        "fix": "A bad node: its link speed ...",
    }
    document = {
        "kind": kind,
        "check": f"perf {kind}",
        "unit": "Gbit/s",
        "median_gbps": median,
        "slow_below_gbps": median / 2,
        "slow_share": 0.5,
        "node_share": 0.75,
        "bad_nodes": [{"host": BAD_NODE, "why": node_why}],
        "nodes": nodes,
        "matrix_gbps": matrix,
        "links": links,
    }
    return document, check


def synthetic_document(count: int, *, rdma: bool = False, seed: int = 1) -> dict:
    """The whole document of a ``count``-node ``doctor --perf`` run (see the module's docstring)."""
    rng = random.Random(seed)
    nodes = [f"p{i}" for i in range(1, count + 1)]
    tcp, tcp_check = _kind("tcp eth0", nodes, 9.4, "rtt_us", rng)
    kinds, checks = [tcp], [tcp_check]
    if rdma:
        rail, rail_check = _kind("rdma mlx5_0:1", nodes, 97.0, "latency_us", rng)
        kinds.append(rail)
        checks.append(rail_check)
    facts = [FACTS.__class__(**{**FACTS.__dict__, "host": node, "hostname": node}) for node in nodes]
    return {
        "schema": "provision.doctor",
        "version": 1,
        "verdict": {
            "line": f"NOT READY: {len(checks)} check(s) fail ({', '.join(c['name'] for c in checks)})",
            "exit_code": 1,
            "ready": False,
        },
        "nodes": nodes,
        "checks": [
            {"name": "reach + job user", "status": "pass", "hosts": [], "detail": f"all {count} nodes answer as mpi"}
            | {"bad_nodes": [], "bad_links": [], "thresholds": {}, "coverage": None, "fix": None},
            *checks,
        ],
        "perf": {
            "interface": "eth0",
            "seconds": 60.0,
            "coverage": tcp_check["coverage"],
            "left_out": [],
            "kinds": kinds,
        },
        "slurm": None,
        "generated_at": "2025-06-01T12:00:00Z",
        "provision_version": "0.1.0",
        "inventory": "inventory/hosts.yml",
        "racks": [{"name": f"rack{k + 1}", "hosts": nodes[k * 16 : (k + 1) * 16]} for k in range((count + 15) // 16)],
        "layouts": node_layouts(facts),
    }
