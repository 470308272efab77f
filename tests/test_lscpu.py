"""lscpu and lscpu -p parsers on real outputs."""

import pytest

from conftest import read_fixture
from provision.errors import ParseError
from provision.facts.lscpu import parse_lscpu, parse_lscpu_parsable


def test_epyc_plain_lscpu_p_with_cache_columns():
    rows = parse_lscpu_parsable(read_fixture("captures", "epyc7451", "lscpu-p.txt"))
    assert len(rows) == 96
    assert rows[48].core == 0 and rows[48].socket == 0 and rows[95].node == 7


def test_empty_node_column_without_numa():
    rows = parse_lscpu_parsable("# CPU,Core,Socket,Node\n0,0,0,\n1,0,0,\n")
    assert [r.node for r in rows] == [None, None]


def test_lscpu_key_values():
    fields = parse_lscpu(read_fixture("captures", "epyc7451", "lscpu.txt"))
    assert fields["Socket(s)"] == "2" and fields["NUMA node(s)"] == "8"


@pytest.mark.parametrize("text", ["", "# only comments\n", "0,0\n", "0,a,0,0\n", "0,0,0,0\n0,1,0,0\n"])
def test_bad_lscpu_p(text):
    with pytest.raises(ParseError, match="lscpu-p"):
        parse_lscpu_parsable(text)


def test_bad_lscpu():
    with pytest.raises(ParseError, match="lscpu"):
        parse_lscpu("no colon here\n")
