"""`doctor --json` (provision/doctor/report.py): the document a program reads, checked against the
schema docs/reference/doctor-json.md describes, on doctor's real checks."""

from __future__ import annotations

import json
from dataclasses import replace

from doctor_support import cluster, node, with_mtu
from provision import __version__
from provision.doctor.drain import DrainReport, drain_plan
from provision.doctor.perf import PerfRun
from provision.doctor.perf_judge import Coverage, Link
from provision.doctor.report import SCHEMA, VERSION, document, kind_document
from provision.doctor.runner import DoctorRun, DoctorSettings, run_checks
from provision.plans.slurm_marks import Mark

CHECK_FIELDS = {"name", "status", "hosts", "detail", "bad_nodes", "bad_links", "thresholds", "coverage", "fix"}
PAIRS = [("n1", "n2"), ("n1", "n3"), ("n1", "n4"), ("n2", "n3"), ("n2", "n4"), ("n3", "n4")]


def _perf(links: list[Link], left_out: dict[str, str] | None = None) -> PerfRun:
    return PerfRun(links, Coverage(len(links), 6, 3, 3, 60.0), left_out or {}, "eth0", 12.5)


def test_every_check_has_its_fields_and_the_document_is_versioned():
    reports = cluster(with_mtu("n3", "eth0", 9000), replace(node("n4"), error="connect: refused", facts=None))
    results = run_checks(reports, DoctorSettings())
    shown = document(results, ["n1", "n2", "n3", "n4"])
    assert json.loads(json.dumps(shown)) == shown  # plain JSON, nothing lost
    assert (shown["schema"], shown["version"]) == (SCHEMA, VERSION) == ("provision.doctor", 1)
    assert shown["verdict"] == {"line": shown["verdict"]["line"], "exit_code": 1, "ready": False}
    assert shown["nodes"] == ["n1", "n2", "n3", "n4"] and shown["perf"] is None and shown["slurm"] is None
    assert all(set(check) == CHECK_FIELDS for check in shown["checks"])
    checks = {check["name"]: check for check in shown["checks"]}
    assert checks["reach + job user"]["bad_nodes"] == [{"host": "n4", "status": "fail", "why": "not reached: connect: refused"}]
    assert checks["network"]["bad_nodes"] == [{"host": "n3", "status": "fail", "why": "eth0 MTU 9000 (the others 1500)"}]
    assert checks["time"]["thresholds"] == {"clock_offset_s": 1.0} and checks["time"]["coverage"] is None
    assert checks["time"]["fix"] is None and checks["network"]["fix"].startswith("Give every node an IPv4 address in one subnet")
    # what a page drawn later needs: unknown here, so null or empty, never absent
    assert shown["provision_version"] == __version__ and shown["generated_at"] is None and shown["inventory"] is None
    assert shown["racks"] == [] and shown["layouts"] == []


def test_a_check_that_names_a_node_only_in_its_detail_says_so_with_null():
    from provision.doctor.model import CheckResult

    result = CheckResult("perf nccl", "fail", ("n1", "n2"), "mpirun exit 1")
    assert result.to_dict()["bad_nodes"] == [
        {"host": "n1", "status": "fail", "why": None},
        {"host": "n2", "status": "fail", "why": None},
    ]


def test_perf_bad_links_have_both_directions_and_the_matrix_every_figure():
    links = [
        Link("tcp eth0", "n1", "n3", 0.09, 0.09, 9.1, 40.0)
        if (a, b) == ("n1", "n3")
        else Link("tcp eth0", a, b, 9.4, 9.4, 9.5, 30.0)
        for a, b in PAIRS
    ]
    perf = _perf(links)
    results = perf.results(4)
    check = results[0].to_dict()
    assert check["name"] == "perf tcp eth0" and check["status"] == "fail" and check["bad_nodes"] == []
    assert check["bad_links"] == [
        {
            "a": "n1",
            "b": "n3",
            "verdict": "bad link",
            "why": check["bad_links"][0]["why"],
            "gbps": 0.09,
            "forward_gbps": 0.09,
            "reverse_gbps": 9.1,
        }
    ]
    assert check["thresholds"] == {"slow_share": 0.5, "node_share": 0.75, "median_gbps": 9.4, "slow_below_gbps": 4.7}
    assert check["coverage"] == {
        "pairs_tested": 6, "pairs_total": 6, "rounds_run": 3, "rounds_planned": 3, "budget_s": 60.0, "stopped_by_budget": False,
    }  # fmt: skip
    shown = document(results, ["n1", "n2", "n3", "n4"], perf=perf)
    [kind] = shown["perf"]["kinds"]
    assert kind["kind"] == "tcp eth0" and kind["check"] == "perf tcp eth0" and kind["nodes"] == ["n1", "n2", "n3", "n4"]
    assert kind["matrix_gbps"] == [
        [None, 9.4, 0.09, 9.4],  # n1 sends
        [9.5, None, 9.4, 9.4],
        [9.1, 9.5, None, 9.4],  # n3 -> n1 is fine: only n1's way out to n3 is slow
        [9.5, 9.5, 9.5, None],
    ]
    verdicts = {(link["a"], link["b"]): link["verdict"] for link in kind["links"]}
    assert verdicts[("n1", "n3")] == "bad link" and set(verdicts.values()) == {"ok", "bad link"}
    assert shown["perf"]["interface"] == "eth0" and shown["perf"]["coverage"]["pairs_tested"] == 6


def test_a_bad_nodes_links_are_slow_and_failed_tests_have_no_figure():
    five = [(f"n{a}", f"n{b}") for a in range(1, 6) for b in range(a + 1, 6)]
    links = [Link("tcp eth0", a, b, 0.09, 0.09, 0.09) if "n2" in (a, b) else Link("tcp eth0", a, b, 9.4) for a, b in five]
    links[-1] = Link("tcp eth0", "n4", "n5", None, error="n5 refused the test port 5201")
    links[five.index(("n3", "n4"))] = Link("tcp eth0", "n3", "n4", None, error="n4 refused the test port 5201")
    kind = kind_document("tcp eth0", links, ["n1", "n2", "n3", "n4", "n5"])
    assert kind["bad_nodes"] == [{"host": "n2", "why": "slow with 4 of 4 peers (median 0.09 Gbit/s)"}]
    verdicts = {(link["a"], link["b"]): (link["verdict"], link["error"]) for link in kind["links"]}
    assert verdicts[("n1", "n2")] == ("slow", None) and verdicts[("n3", "n4")] == ("failed", "n4 refused the test port 5201")
    assert kind["matrix_gbps"][2][3] is None and kind["matrix_gbps"][0][2] == 9.4  # one figure, no direction: the client's


def test_what_drain_did_is_in_the_document_and_a_failed_drain_fails_the_run():
    results = run_checks(cluster(), DoctorSettings())
    run = DoctorRun(results, cluster(), {})
    report = DrainReport("ctl", drain_plan(run), {"n1": Mark("n1", "resumed", "provision: hardware: x")})
    shown = document(results, ["n1", "n2", "n3", "n4"], drain=report)
    assert shown["slurm"] == {
        "slurm_host": "ctl",
        "marker": "provision:",
        "error": None,
        "nodes": [{"host": "n1", "node": "n1", "outcome": "resumed", "detail": "provision: hardware: x"}],
        "not_reached": [],
        "bad_links": [],
    }
    failed = document(results, ["n1"], drain=replace(report, error="connect: timed out"))
    assert failed["verdict"]["exit_code"] == 1 and failed["verdict"]["ready"] == (shown["verdict"]["exit_code"] == 0)
