"""Filling a shape from the healthy hosts (provision.plans.healthy) and what counts as at fault
(provision.doctor.healthy.at_fault)."""

from __future__ import annotations

import dataclasses

import pytest

from provision.doctor.healthy import at_fault, select_around_links
from provision.doctor.model import CheckResult
from provision.doctor.perf import PerfRun
from provision.doctor.perf_judge import Coverage, Link
from provision.doctor.perf_rdma import RdmaRun
from provision.doctor.runner import DoctorRun
from provision.errors import PlanError
from provision.inventory.model import Rack
from provision.plans.dims import Dims
from provision.plans.healthy import fill_shape

RACKS = [Rack("r1", ("a1", "a2", "a3")), Rack("r2", ("b1", "b2")), Rack("r3", ("c1", "c2", "c3"))]
ALL = [h for rack in RACKS for h in rack.hosts]


def test_all_healthy_takes_the_first_y_of_the_first_z_racks_and_says_why_the_rest_are_not_needed():
    pick = fill_shape(Dims(4, 2, 2), ALL, RACKS, {})
    assert pick.hosts == ("a1", "a2", "b1", "b2")
    assert dict(pick.left_out) == {
        "a3": "not needed: rack r1 gives Y = 2",
        "c1": "not needed: the shape is full",
        "c2": "not needed: the shape is full",
        "c3": "not needed: the shape is full",
    }


def test_a_rack_short_of_healthy_hosts_is_skipped_for_the_next():
    pick = fill_shape(Dims(4, 2, 2), ALL, RACKS, {"b2": "perf: bad node"})
    assert pick.hosts == ("a1", "a2", "c1", "c2")
    left = dict(pick.left_out)
    assert left["b2"] == "perf: bad node" and left["b1"] == "rack r2 has 1 healthy hosts, fewer than Y = 2"


def test_too_few_healthy_hosts_is_one_line_naming_them():
    with pytest.raises(PlanError) as error:
        fill_shape(Dims(4, 3, 2), ALL, RACKS, {"a2": "reach + job user: unreachable"})
    assert str(error.value) == (
        "dims 4x3x2 need 2 racks of 3 healthy hosts; only 1 of the inventory's racks have them; "
        "at fault: a2 (reach + job user: unreachable)"
    )


def test_without_racks_the_first_healthy_hosts_in_order():
    pick = fill_shape(Dims(1, 3, 1), ["n1", "n2", "n3", "n4", "n5"], [], {"n2": "software: OpenMPI 5"})
    assert pick.hosts == ("n1", "n3", "n4")
    assert pick.left_out == (("n2", "software: OpenMPI 5"), ("n5", "not needed: the shape takes Y·Z = 3"))
    with pytest.raises(PlanError, match=r"need Y·Z = 5 healthy hosts; 4 of 5 are; at fault: n2"):
        fill_shape(Dims(1, 5, 1), ["n1", "n2", "n3", "n4", "n5"], [], {"n2": "software: OpenMPI 5"})


def _run(links, results=()):
    perf = PerfRun(links, Coverage(len(links), len(links), 1, 1, None), {}, "eth0", 1.0)
    return DoctorRun(list(results), [], {}, perf)


def test_at_fault_leaves_out_a_bad_node_the_later_end_of_a_bad_link_and_a_refusing_server():
    nodes = ["n1", "n2", "n3", "n4", "n5", "n6"]
    speeds = {frozenset(("n1", p)): 0.1 for p in nodes[1:]} | {frozenset(("n3", "n5")): 0.2}
    links = [
        Link("tcp eth0", a, b, speeds.get(frozenset((a, b)), 10.0))
        for i, a in enumerate(nodes)
        for b in nodes[i + 1 :]
        if {a, b} != {"n4", "n6"}
    ]
    links.append(Link("tcp eth0", "n4", "n6", None, error="n6 refused the test port 47201"))
    failing = CheckResult("software", "fail", ("n2",), "OpenMPI 5 on n2")
    unhealthy = at_fault(_run(links, [failing]), nodes)
    assert set(unhealthy) == {"n1", "n5", "n6", "n2"}
    assert unhealthy["n1"].startswith("perf: bad node: slow with 5 of 5 peers")
    assert unhealthy["n5"].startswith("perf: bad link n3-n5")
    assert unhealthy["n6"] == "perf: n4-n6: n6 refused the test port 47201"
    assert unhealthy["n2"] == "software: OpenMPI 5 on n2"


def test_at_fault_judges_each_rdma_rail_apart_leaves_out_a_node_without_perftest_and_no_host_for_a_failed_all_reduce():
    nodes = ["n1", "n2", "n3", "n4"]
    pairs = [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]
    tcp = [Link("tcp eth0", a, b, 10.0) for a, b in pairs]
    rail0 = [Link("rdma mlx5_0:1", a, b, 96.0) for a, b in pairs]
    rail1 = [Link("rdma mlx5_1:1", a, b, 20.0 if (a, b) == ("n2", "n3") else 95.0) for a, b in pairs]
    rdma = RdmaRun(rail0 + rail1, {"n5": "mlx5_0:1"}, {})
    run = _run(tcp, [])
    nccl = CheckResult("perf nccl all_reduce", "fail", tuple(nodes), "the all-reduce failed: mpirun exit 1")
    run = DoctorRun([*rdma.results(), nccl], [], {}, dataclasses.replace(run.perf, rdma=rdma, nccl=nccl))
    unhealthy = at_fault(run, [*nodes, "n5"])
    assert set(unhealthy) == {"n3", "n5"}  # the later end of mlx5_1:1's bad link; rail mlx5_0:1 is fine
    assert unhealthy["n3"].startswith("perf rdma mlx5_1:1: bad link n2-n3: 20 Gbit/s")
    assert unhealthy["n5"].startswith("perf rdma: no ib_write_bw on PATH")


def test_a_bad_link_is_stepped_around_where_a_spare_host_allows_it_else_crossed_and_said():
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    links = [Link("tcp eth0", a, b, 0.1 if (a, b) == ("n1", "n3") else 10.0) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]
    run = _run(links)
    run = dataclasses.replace(run, results=run.perf.results(5))
    spare = select_around_links(Dims(1, 4, 1), nodes, [], run)
    assert spare.hosts == ("n1", "n2", "n4", "n5") and spare.notes == ()
    assert dict(spare.left_out)["n3"].startswith("perf: bad link n1-n3")
    tight = select_around_links(Dims(1, 5, 1), nodes, [], run)
    assert tight.hosts == tuple(nodes) and tight.left_out == ()
    assert tight.notes == ("kept both ends of bad link(s) n1-n3: too few healthy hosts to leave one end out",)
    with pytest.raises(PlanError, match="need Y·Z = 6 healthy hosts; 5 of 5 are"):
        select_around_links(Dims(1, 6, 1), nodes, [], run)
