"""CPU list syntax."""

import pytest
from hypothesis import given, strategies as st

from provision.errors import ParseError
from provision.facts.cpulist import format_ranges, parse_cpulist


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
