"""Rank files: rank_gen's numbering and the seed's files, slots from facts, validation."""

import dataclasses

import pytest

from conftest import capture_dir
from plan_support import eight_core, minsky, seed_rankfile_body
from provision.errors import PlanError
from provision.facts.derive import derive_facts
from provision.plans.dims import parse_dims
from provision.plans.rankfile import RULE_GPU, RULE_RANK_GEN, plan_rankfile, rank_of, render_rankfile

SEED_HOSTS = ["sys-89074", "sys-89075", "sys-89076", "sys-89077", "sys-89078", "sys-89079"]


def body(text):
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("rank "))
    return lines[first:]


@pytest.mark.parametrize("dims, hosts", [("4x2x1", SEED_HOSTS[:2]), ("4x2x3", SEED_HOSTS)])
def test_matches_seed_rank_gen_output(dims, hosts):
    plan = plan_rankfile(parse_dims(dims), [minsky(h) for h in hosts])
    text = render_rankfile(plan, "2017-09-14 04:45:51")
    assert body(text) == seed_rankfile_body(dims)
    assert text.endswith("slot=1:5-9\n") and not text.endswith("\n\n")
    header = text.splitlines()
    assert header[0].startswith("#2017-09-14 04:45:51 by provision")
    assert header[1:8] == [
        f"#dims = {dims}",
        f"#host = {','.join(hosts)}",
        "#dimX = 4",
        f"#dimY = {dims[2]}",
        f"#dimZ = {dims[4]}",
        "#sockets = 2",
        "#cores = 10",
    ]
    assert any(line.startswith("#facts sys-89074 = 2x10x8") for line in header)


def test_rank_formula():
    dims = parse_dims("4x2x3")
    assert [rank_of(dims, 0, h) for h in range(6)] == [0, 3, 1, 4, 2, 5]
    assert rank_of(dims, 3, 5) == 23


def test_eight_core_chips_get_0_3_and_4_7():
    plan = plan_rankfile(parse_dims("4x1x1"), [eight_core("host1")])
    assert [s.slot_text() for s in plan.slots()] == ["0:0-3", "0:4-7", "1:0-3", "1:4-7"]


def test_gpu_affinity_binds_learner_to_its_gpus_socket():
    facts = minsky("n1", gpu_sockets=(1, 1, 0, 0))  # GPUs 0,1 hang off socket 1
    plan = plan_rankfile(parse_dims("4x1x1"), [facts])
    assert plan.hosts[0].rule == RULE_GPU
    assert [(s.learner, s.slot_text()) for s in plan.slots()] == [(0, "1:0-4"), (1, "1:5-9"), (2, "0:0-4"), (3, "0:5-9")]
    rank_gen = plan_rankfile(parse_dims("4x1x1"), [facts], use_gpu_affinity=False)
    assert rank_gen.hosts[0].rule == RULE_RANK_GEN and rank_gen.slots()[0].slot_text() == "0:0-4"


def test_all_gpus_on_one_socket():
    plan = plan_rankfile(parse_dims("4x1x1"), [minsky("n1", gpu_sockets=(0, 0, 0, 0))])
    assert [s.slot_text() for s in plan.slots()] == ["0:0-1", "0:2-3", "0:4-5", "0:6-7"]


def test_fewer_learners_than_sockets_take_whole_sockets():
    plan = plan_rankfile(parse_dims("1x1x1"), [minsky("n1", gpus=1, gpu_sockets=None)])
    assert [s.slot_text() for s in plan.slots()] == ["0:0-9"]


def test_heterogeneous_hosts_each_use_own_facts_with_warning():
    plan = plan_rankfile(parse_dims("4x2x1"), [minsky("a"), eight_core("b")])
    assert [s.slot_text() for s in plan.hosts[1].slots] == ["0:0-3", "0:4-7", "1:0-3", "1:4-7"]
    assert any("host b is 2x8x8" in w for w in plan.warnings)
    assert "#cores = varies" in render_rankfile(plan, "now")


@pytest.mark.parametrize(
    "dims, hosts, message",
    [
        ("4x3x1", ["a", "b"], "need Y·Z = 3 hosts, got 2"),
        ("8x1x1", ["a"], "8 learners per host but 4 GPU(s)"),
        ("4x2x1", ["a", "a"], "listed twice"),
    ],
)
def test_validation_errors(dims, hosts, message):
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_rankfile(parse_dims(dims), [minsky(h) for h in hosts])


def test_not_spreadable_and_too_few_cores():
    vm = derive_facts("vm", capture_dir("vm-x86"))  # 1 socket x 2 cores
    with pytest.raises(PlanError, match="socket 0 has 2 usable core"):
        plan_rankfile(parse_dims("3x1x1"), [vm], allow_no_gpu=True)
    two_sockets = minsky("n1", gpus=0, gpu_sockets=None)
    with pytest.raises(PlanError, match="3 learners cannot be spread evenly over 2 sockets"):
        plan_rankfile(parse_dims("3x1x1"), [two_sockets], allow_no_gpu=True)


def test_never_a_core_the_host_lacks():
    for learners in (1, 2, 4, 6, 10, 20):
        plan = plan_rankfile(parse_dims(f"{learners}x1x1"), [minsky("n1", gpus=0, gpu_sockets=None)], allow_no_gpu=True)
        for slot in plan.slots():
            assert slot.last_core < 10


def _with_core_indexes(facts, indexes):
    """``facts`` whose socket 0 has cores numbered ``indexes`` (as a hand-edited facts file could say)."""
    socket = facts.cpu.sockets[0]
    cores = tuple(dataclasses.replace(core, index=i) for core, i in zip(socket.cores, indexes, strict=False))
    sockets = (dataclasses.replace(socket, cores=cores), *facts.cpu.sockets[1:])
    return dataclasses.replace(facts, cpu=dataclasses.replace(facts.cpu, sockets=sockets))


def test_a_core_number_the_host_lacks_is_a_plan_error_not_an_assert():
    gap = _with_core_indexes(minsky("n1", gpus=0, gpu_sockets=None), [0, 1, 2, 3, 4, 5, 6, 7, 8, 12])
    with pytest.raises(PlanError, match="host n1: socket 0 has no core 9"):
        plan_rankfile(parse_dims("2x1x1"), [gap], allow_no_gpu=True)


def test_a_gpu_on_a_socket_the_host_lacks_is_a_plan_error():
    with pytest.raises(PlanError, match="host n1: GPU 2 is on socket 7, but the host has sockets 0-1"):
        plan_rankfile(parse_dims("4x1x1"), [minsky("n1", gpu_sockets=(0, 0, 7, 1))])
