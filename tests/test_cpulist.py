"""CPU list syntax."""

import pytest
from hypothesis import given, strategies as st

from provision.errors import ParseError
from provision.facts.cpulist import MAX_CPUS, format_ranges, parse_cpulist, parse_number


def test_ranges():
    assert parse_cpulist("0-2,8", "x") == (0, 1, 2, 8)
    assert format_ranges([5, 0, 1, 2]) == "0-2,5"


@pytest.mark.parametrize("text", ["a", "3-1", "1,,2", "1-"])
def test_bad(text):
    with pytest.raises(ParseError):
        parse_cpulist(text, "x")


@given(st.sets(st.integers(0, 4096), min_size=1))
def test_round_trip(numbers):
    assert parse_cpulist(format_ranges(sorted(numbers)), "x") == tuple(sorted(numbers))


@pytest.mark.parametrize("text", ["0-99999999", "65536", "0-65535,70000", "0-40000,0-40000", "1" * 5000, "²"])
def test_every_expansion_is_bounded(text):
    with pytest.raises(ParseError, match="beyond 65536 CPUs|bad CPU list item"):
        parse_cpulist(text, "x")


def test_the_bound_itself_is_accepted():
    assert len(parse_cpulist(f"0-{MAX_CPUS - 1}", "x")) == MAX_CPUS


@pytest.mark.parametrize("text", ["²", "1" * 5000, "-1", ""])
def test_parse_number_refuses_what_int_would_crash_on(text):
    with pytest.raises(ParseError):
        parse_number(text, "x")
