"""`doctor --drain` (provision/doctor/drain.py): what one run asks of Slurm, on doctor's real checks
over reports built on the real node-container capture; then the whole round trip to a "Slurm
host" that is this machine (``localhost``) with the TEST STAND-INs of sinfo and scontrol.
tests/test_slurm_drain_cluster.py does it against the real slurmctld."""

from __future__ import annotations

from dataclasses import replace

import pytest

from doctor_support import cluster, node
from marks_support import scontrol_calls, slurm_standin
from provision.doctor.drain import DrainPlan, apply_marks, drain_plan, drains, mark_calls
from provision.doctor.model import GpuHealth
from provision.doctor.perf import PerfRun
from provision.doctor.perf_judge import Coverage, Link
from provision.doctor.runner import DoctorRun, DoctorSettings, run_checks
from provision.errors import ProvisionError
from provision.facts.model import Gpu
from provision.inventory.model import Host
from provision.transport.options import SshOptions

V100 = Gpu(0, "Tesla V100-SXM2-16GB", "0000:1a:00.0", 16160, 0, 0, "test")


def _run(reports, links: list[Link] | None = None) -> DoctorRun:
    results = run_checks(reports, DoctorSettings())
    perf = None
    if links is not None:
        hosts = sorted({h for link in links for h in (link.a, link.b)})
        perf = PerfRun(links, Coverage(len(links), len(hosts) * (len(hosts) - 1) // 2, 1, 1, None), {}, "eth0", 1.0)
        results += perf.results(len(reports))
    return DoctorRun(results, reports, {}, perf)


def _with_gpus(host: str, count: int, **changes):
    base = node(host)
    gpus = tuple(replace(V100, index=i, bus_id=f"0000:1{i}:00.0") for i in range(count))
    health = tuple(GpuHealth(g.bus_id, True, 0, False, False) for g in gpus)
    return replace(base, facts=replace(base.facts, gpus=gpus), gpu_health=health, pci_gpus=count, xids=(), **changes)


def test_a_node_at_fault_is_drained_naming_the_check_and_the_others_offered_a_resume():
    reports = [_with_gpus(f"n{i}", 1 if i == 2 else 2) for i in range(1, 5)]
    plan = drain_plan(_run(reports))
    assert plan.drain == {
        "n2": ("hardware", "provision: hardware: GPUs 1 x Tesla V100-SXM2-16GB (the others 2 x Tesla V100-SXM2-16GB)")
    }
    assert set(plan.resume) == {"n1", "n3", "n4"} and {"hardware", "gpu health", "limits"} <= set(plan.resume["n1"])
    assert plan.not_reached == {} and plan.links == ()


def test_an_unreached_node_is_named_neither_drained_nor_resumed():
    reports = cluster(replace(node("n3"), error="connect: timed out", facts=None))
    plan = drain_plan(_run(reports))
    assert plan.not_reached == {"n3": "connect: timed out"} and "n3" not in plan.drain and "n3" not in plan.resume


def test_a_node_that_only_warns_in_a_failing_check_is_not_drained():
    bad = _with_gpus("n2", 2)
    bad = replace(bad, gpu_health=(replace(bad.gpu_health[0], remapped_pending=True), bad.gpu_health[1]))
    warned = _with_gpus("n1", 2)
    warned = replace(warned, gpu_health=tuple(replace(g, persistence=False) for g in warned.gpu_health))
    plan = drain_plan(_run([warned, bad, _with_gpus("n3", 2)]))
    assert plan.drain == {"n2": ("gpu health", "provision: gpu health: GPU 0000:10:00.0: row remapping pending (reset the GPU)")}
    assert "gpu health" in plan.resume["n1"]  # persistence mode off: a warning, it passed


def test_checks_that_say_nothing_of_the_node_itself_never_drain_it():
    assert not any(
        drains(name) for name in ("reach + job user", "pairwise ssh", "names", "time", "perf nodes", "perf rdma", "perf nccl")
    )
    assert all(drains(name) for name in ("hardware", "gpu health", "dataset /data/set", "perf tcp eth0", "perf rdma mlx5_0:1"))
    plan = drain_plan(_run(cluster(replace(node("n2"), pairwise={"n1": "Permission denied (publickey)."}))))
    assert plan.drain == {}  # n2 reaches no peer: reported by doctor, no reason to take it out of Slurm


def _link(a: str, b: str, gbps: float, forward: float | None = None, reverse: float | None = None) -> Link:
    return Link("tcp eth0", a, b, gbps, forward or gbps, reverse or gbps)


PAIRS = [("n1", "n2"), ("n1", "n3"), ("n1", "n4"), ("n2", "n3"), ("n2", "n4"), ("n3", "n4")]


def test_perf_a_bad_node_is_drained_a_bad_link_drains_neither_and_an_untested_node_keeps_a_perf_drain():
    slow_node = [_link(a, b, 0.09 if "n2" in (a, b) else 9.4) for a, b in PAIRS]
    plan = drain_plan(_run(cluster(), slow_node))
    assert list(plan.drain) == ["n2"] and plan.drain["n2"][1].startswith(
        "provision: perf tcp eth0: bad node: slow with 3 of 3 peers"
    )
    slow_link = [_link(a, b, 0.09, 0.09, 9.1) if (a, b) == ("n1", "n3") else _link(a, b, 9.4) for a, b in PAIRS]
    plan = drain_plan(_run(cluster(), slow_link))
    assert plan.drain == {} and [(x.a, x.b, x.verdict, x.forward_gbps, x.reverse_gbps) for x in plan.links] == [
        ("n1", "n3", "bad link", 0.09, 9.1)
    ]
    assert "perf tcp eth0" in plan.resume["n1"] and "perf tcp eth0" in plan.resume["n3"]
    untested = [link for link in slow_link if "n4" not in (link.a, link.b)]  # n4 in no measured link
    plan = drain_plan(_run(cluster(), untested))
    assert "perf tcp eth0" not in plan.resume["n4"]  # a drain for bandwidth is lifted only by a bandwidth test


def test_calls_are_quoted_words_and_two_hosts_cannot_be_one_node():
    plan = DrainPlan({"n1.example": ("hardware", "provision: hardware: it's $(bad)")}, {"n2": ("gpu count", "x")}, {})
    calls, hosts = mark_calls(plan)
    assert calls == ["n1 drain 'provision: hardware: it'\"'\"'s $(bad)'", "n2 resume 'gpu count' x"]
    assert hosts == {"n1": "n1.example", "n2": "n2"}
    with pytest.raises(ProvisionError, match="both Slurm node n1"):
        mark_calls(DrainPlan({"n1.a": ("x", "y")}, {"n1.b": ()}, {}))


def test_the_round_trip_on_the_slurm_host(tmp_path, monkeypatch):
    folder = tmp_path / "slurm"
    env = slurm_standin(folder, "n1 idle none\nn2 idle none\nn3 drain provision: hardware: GPUs 1 x V100\nn4 drain admin\n")
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("SLURM_STANDIN", env["SLURM_STANDIN"])
    plan = DrainPlan(
        {"n2": ("gpu health", "provision: gpu health: GPU 0000:10:00.0: row remapping pending")},
        {"n1": ("hardware",), "n3": ("hardware", "limits"), "n4": ("hardware",)},
        {"n5": "connect: timed out"},
    )
    report = apply_marks(plan, Host("localhost"), SshOptions())
    assert report.ok and {host: mark.outcome for host, mark in report.marks.items()} == {
        "n2": "drained",
        "n1": "up",
        "n3": "resumed",
        "n4": "left",
    }
    assert scontrol_calls(folder) == [
        "update | NodeName=n2 | State=DRAIN | Reason=provision: gpu health: GPU 0000:10:00.0: row remapping pending",
        "update | NodeName=n3 | State=RESUME",
    ]
    document = report.to_dict()
    assert document["not_reached"] == [{"host": "n5", "why": "connect: timed out"}] and document["error"] is None
    (folder / "sinfo-fails").write_text("sinfo: error: Unable to contact slurm controller\n")
    failed = apply_marks(plan, Host("localhost"), SshOptions())
    assert (
        not failed.ok
        and failed.marks == {}
        and failed.error == "sinfo on localhost: sinfo: error: Unable to contact slurm controller"
    )


def test_the_table_ends_with_what_slurm_did():
    from rich.console import Console

    from provision.cli.doctor_view import print_marks
    from provision.doctor.drain import DrainReport
    from provision.doctor.model import LinkFinding
    from provision.plans.slurm_marks import Mark

    plan = DrainPlan({}, {}, {"n5": "connect: timed out"}, (LinkFinding("n1", "n3", "bad link", "0.09 Gbit/s"),))
    marks = {
        "n1": Mark("n1", "up"),
        "n2": Mark("n2", "drained", "provision: hardware: GPUs 1"),
        "n4": Mark("n4", "left", "admin"),
    }
    console = Console(record=True, width=200)
    assert print_marks(DrainReport("ctl", plan, marks), console) == 0
    assert console.export_text().splitlines() == [
        "slurm: n2: drained (provision: hardware: GPUs 1)",
        "slurm: n4: left alone: drained or down for a reason provision did not set (admin)",
        "slurm: n5: not reached, not drained (connect: timed out)",
        "slurm: link n1-n3: bad link, neither node drained (0.09 Gbit/s)",
    ]
    failed = Console(record=True, width=200)
    assert print_marks(DrainReport("ctl", plan, {"n2": Mark("n2", "failed", "scontrol: denied")}), failed) == 1
