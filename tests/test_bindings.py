"""--report-bindings lines of OpenMPI 4 and 5 (real lines from the test cluster's nodes), checked against plans."""

import dataclasses

from hypothesis import given, strategies as st

from plan_support import minsky
from provision.launch.bindings import Binding, check_bindings, parse_binding_line
from provision.plans.dims import parse_dims
from provision.plans.rankfile import plan_rankfile

# Real lines printed by Debian bookworm's OpenMPI 4.1.4 and trixie's 5.0.7 in the test images (2-core nodes);
# in the first two of each, the cluster's node names stand where a bare container printed its id.
V4_LINES = """\
[node1:00018] MCW rank 0 bound to socket 0[core 0[hwt 0]]: [B/.]
[node2:00091] MCW rank 1 bound to socket 0[core 1[hwt 0]]: [./B]
[44b1a2aad66d:00013] MCW rank 0 is not bound (or bound to all available processors)
[44b1a2aad66d:00018] 1 more process has sent help message help-orte-odls-default.txt / memory not bound
"""
V5_LINES = """\
[m51:00025] Rank 0 bound to package[0][core:0]
[m52:00031] Rank 1 bound to package[0][core:1]
[5a06ea86edf6:00038] Rank 0 bound to package[0][core:0-1]
[ac1128e72474:00013] Rank 1 is not bound (or bound to all available processors)
"""


def test_openmpi_4_lines():
    parsed = [parse_binding_line(line) for line in V4_LINES.splitlines()]
    assert parsed == [
        Binding("node1", 0, ((0, 0),)),
        Binding("node2", 1, ((0, 1),)),
        Binding("44b1a2aad66d", 0, ()),
        None,
    ]
    # Several cores, several threads each (a POWER8 rank of 2 cores at SMT8).
    line = "[c1:01] MCW rank 3 bound to socket 1[core 10[hwt 0-7]], socket 1[core 11[hwt 0-7]]: [........][BBBBBBBB]"
    assert parse_binding_line(line) == Binding("c1", 3, ((1, 10), (1, 11)))


def test_openmpi_5_lines():
    parsed = [parse_binding_line(line) for line in V5_LINES.splitlines()]
    assert parsed == [
        Binding("m51", 0, ((0, 0),)),
        Binding("m52", 1, ((0, 1),)),
        Binding("5a06ea86edf6", 0, ((0, 0), (0, 1))),
        Binding("ac1128e72474", 1, ()),
    ]
    assert parse_binding_line("[m:1] Rank 2 bound to package[1][core:0,4-5]") == Binding("m", 2, ((1, 0), (1, 4), (1, 5)))
    assert parse_binding_line("[m:1] Rank 2 bound to package[0][core:9-3]") == Binding("m", 2, ())  # descending: nothing trusted


@given(st.text(max_size=300))
def test_any_text_is_a_binding_or_none(text):
    result = parse_binding_line(text)
    assert result is None or isinstance(result, Binding)


def test_huge_core_range_is_bounded():
    assert parse_binding_line("[m:1] Rank 0 bound to package[0][core:0-999999999]") == Binding("m", 0, ())


def two_hosts(dims="2x2x1"):
    # The Minsky (2 sockets x 10 cores): rank_gen gives learner 0 socket 0, learner 1 socket 1.
    return plan_rankfile(parse_dims(dims), [minsky("a", gpus=2, gpu_sockets=None), minsky("b", gpus=2, gpu_sockets=None)])


def planned_bindings(plan):
    return {
        s.rank: Binding(s.host, s.rank, tuple((s.socket, c) for c in range(s.first_core, s.last_core + 1))) for s in plan.slots()
    }


def test_check_bindings_as_planned_and_each_kind_of_difference():
    plan = two_hosts()
    good = planned_bindings(plan)
    assert check_bindings(plan, good) == []
    rank0 = good[0]
    bad = dict(good)
    del bad[3]
    bad[0] = dataclasses.replace(rank0, host="b")
    bad[1] = dataclasses.replace(good[1], cores=((0, 0),))
    problems = check_bindings(plan, bad)
    assert problems == [
        "rank 0: ran on b, planned a 0:0-9",
        "rank 1: bound to 0:0 on b, planned b 0:0-9",
        "rank 3: no binding reported (planned b 1:0-9)",
    ]
    # "not bound" is not the planned half of a 2-socket node
    assert check_bindings(plan, good | {2: dataclasses.replace(good[2], cores=())}) == [
        "rank 2: not bound (or bound to the whole node) on a, planned a 1:0-9"
    ]


def test_whole_node_rank_reported_as_not_bound_is_as_planned():
    facts = minsky("a", gpus=1, gpu_sockets=None)
    one_socket = dataclasses.replace(facts, cpu=dataclasses.replace(facts.cpu, sockets=facts.cpu.sockets[:1]))
    plan = plan_rankfile(parse_dims("1x1x1"), [one_socket])
    assert check_bindings(plan, {0: Binding("a", 0, ())}) == []
