"""Checking existing rank files against facts (the seed's 2x10core.rf on 8-core hosts)."""

import pytest

from plan_support import eight_core, minsky
from provision.errors import PlanError
from provision.plans.rankcheck import check_rankfile, gpu_problems, parse_rankfile


def test_seed_10_core_file_on_8_core_host_names_the_lines():
    lines = parse_rankfile("rank 0=host1 slot=0:0-9\nrank 1=host1 slot=1:0-9\n", "2x10core.rf")
    problems = check_rankfile(lines, {"host1": eight_core("host1")}, "2x10core.rf")
    assert problems == [
        "2x10core.rf:1: rank 0=host1 slot=0:0-9: host host1 socket 0 has cores 0-7; core(s) 8-9 do not exist",
        "2x10core.rf:2: rank 1=host1 slot=1:0-9: host host1 socket 1 has cores 0-7; core(s) 8-9 do not exist",
    ]
    good = parse_rankfile("rank 0=host1 slot=0:0-7\nrank 1=host1 slot=1:0-7\n")
    assert check_rankfile(good, {"host1": eight_core("host1")}) == []


def test_missing_host_and_socket():
    lines = parse_rankfile("# c\nrank 0=a slot=2:0\nrank 1=zz slot=0:0,3\n", "f.rf")
    problems = check_rankfile(lines, {"a": minsky("a")}, "f.rf")
    assert "f.rf:2" in problems[0] and "2 socket(s)" in problems[0]
    assert "f.rf:3" in problems[1] and "provision probe zz" in problems[1]


@pytest.mark.parametrize(
    "text, message",
    [
        ("rank 0 = a slot 0:0\n", "f.rf:1"),
        ("rank 0=a slot=0-3\n", "f.rf:1: slot '0-3'"),
        ("rank 0=a slot=0:0\nrank 0=a slot=0:1\n", "f.rf:2: rank 0 already given on line 1"),
        ("rank 1=a slot=0:0\n", "ranks must be 0..0"),
        ("# only comments\n", "no 'rank"),
        ("rank 0=a slot=0:5-2\n", "descending"),
    ],
)
def test_syntax_errors(text, message):
    with pytest.raises(PlanError, match=message):
        parse_rankfile(text, "f.rf")


def test_a_host_given_more_ranks_than_gpus_is_named_with_what_each_rank_would_get(tmp_path):
    """Bad input (issue 32): a rank file giving two ranks one GPU. Each rank's GPU is its local rank
    (its rank's order among its host's), so a fifth rank on a 4-GPU host has none of its own."""
    text = "".join(f"rank {r}=a slot={r % 2}:{r // 2}\n" for r in range(5)) + "rank 5=b slot=0:0\n"
    lines = parse_rankfile(text, "5on4.rf")
    facts = {"a": minsky("a"), "b": minsky("b", gpus=0)}  # b has no GPU: a CPU-only host is not asked
    assert check_rankfile(lines, facts, "5on4.rf") == []
    assert gpu_problems(lines, facts, "5on4.rf") == [
        "5on4.rf: host a: 5 ranks but 4 GPU(s); by local rank, rank 0 gets GPU 0, rank 1 GPU 1, rank 2 GPU 2, rank 3 GPU 3, "
        "rank 4 none: a rank past the GPUs has none of its own (by LOCAL_RANK % 4 two ranks would share one, which NCCL "
        "refuses); give a at most 4 ranks"
    ]
    # through the CLI: the line on stdout, exit 1, as for a core that does not exist
    from conftest import run_cli
    from provision.probe.store import save_host

    for facts_of in facts.values():
        save_host(tmp_path / "facts", facts_of, {})
    (tmp_path / "5on4.rf").write_text(text)
    done = run_cli("rankfile", "--check", str(tmp_path / "5on4.rf"), "--facts-dir", str(tmp_path / "facts"))
    assert done.returncode == 1 and done.stdout.count("\n") == 1 and "host a: 5 ranks but 4 GPU(s)" in done.stdout
