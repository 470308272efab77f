"""Checking existing rank files against facts (the seed's 2x10core.rf on 8-core hosts)."""

import pytest

from plan_support import eight_core, minsky
from provision.errors import PlanError
from provision.plans.rankcheck import check_rankfile, parse_rankfile


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
