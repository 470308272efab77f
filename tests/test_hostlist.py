"""Slurm hostlist folding and expansion (pure); tests/test_hostlist_slurm.py checks them against scontrol."""

import pytest
from hypothesis import given, strategies as st

from provision.plans.hostlist import HostlistError, expand, fold, sorted_hosts


@pytest.mark.parametrize(
    ("names", "folded"),
    [
        ([f"node{n:02d}" for n in range(1, 17)], "node[01-16]"),
        (["node01", "node02", "node03", "node07", "gpu8", "gpu9", "gpu10"], "gpu[8-10],node[01-03,07]"),
        (["node7"], "node7"),
        (["node9", "node10", "node11"], "node[9-11]"),  # unpadded suffixes of different lengths fold
        (["node09", "node10"], "node[09-10]"),
        (["node1", "node01"], "node[1,01]"),  # different hosts: padding is part of the name
        (["login", "node2", "node1", "node2"], "login,node[1-2]"),
        (["a", "b", "c"], "a,b,c"),  # no common prefix: a plain list, still a hostlist
        (["rack1-n01", "rack1-n02", "rack2-n01"], "rack1-n[01-02],rack2-n01"),
        (["n099", "n100", "n101"], "n[099-101]"),
    ],
)
def test_fold_as_administrators_write_it(names, folded):
    assert fold(names) == folded
    assert expand(folded) == sorted_hosts(names)


def test_expand_reads_ranges_and_lists():
    assert expand("node[01-03,07],gpu8") == ["node01", "node02", "node03", "node07", "gpu8"]
    assert expand("n[9-11]") == ["n9", "n10", "n11"]


@pytest.mark.parametrize("bad", ["node[3-1]", "node[a-b]", "node[1-2", "rack[1-2]-n[01-02]", "a,,b"])
def test_expand_refuses_what_is_no_hostlist(bad):
    with pytest.raises(HostlistError):
        expand(bad)


@pytest.mark.parametrize("bad", ["node[1]", "a,b", "node 1", ""])
def test_fold_refuses_names_no_hostlist_can_hold(bad):
    with pytest.raises(HostlistError, match="hostlist cannot hold"):
        fold([bad])


@given(
    st.lists(
        st.tuples(st.sampled_from(["node", "gpu", "r1n", "x-"]), st.integers(0, 120), st.integers(0, 3)),
        min_size=1,
        max_size=40,
    )
)
def test_fold_then_expand_gives_the_same_hosts(parts):
    names = [f"{prefix}{number:0{width}d}" if width else f"{prefix}{number}" for prefix, number, width in parts]
    assert expand(fold(names)) == sorted_hosts(names)
