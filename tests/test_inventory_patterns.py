"""Ansible's host patterns over an inventory: cases as data (pattern words -> host names)."""

import pytest

from provision.inventory.model import Host, Inventory, Rack
from provision.inventory.patterns import PatternError, select_hosts, split_pattern

HOSTS = ["w1", "w2", "w3", "w10", "login"]
INVENTORY = Inventory(
    hosts={name: Host(name) for name in HOSTS},
    groups={"gpu": ("w1", "w2", "w3"), "big": ("w10", "w3")},
    racks=(Rack("rack1", ("w1", "w2")), Rack("rack2", ("w3", "w10"))),
)


@pytest.mark.parametrize(
    "patterns, hosts",
    [
        ([], HOSTS),
        (["all"], HOSTS),
        (["*"], HOSTS),
        (["w1,w2"], ["w1", "w2"]),
        (["w2", "w1"], ["w2", "w1"]),
        (["w1, w2"], ["w1", "w2"]),
        (["gpu"], ["w1", "w2", "w3"]),
        (["gpu:!w3"], ["w1", "w2"]),
        (["gpu,!w3"], ["w1", "w2"]),
        (["!w3"], ["w1", "w2", "w10", "login"]),
        (["gpu:&rack1"], ["w1", "w2"]),
        (["gpu:&big"], ["w3"]),
        (["gpu:big:!rack2"], ["w1", "w2"]),
        (["rack2"], ["w3", "w10"]),
        (["w[1:3]"], ["w1", "w2", "w3"]),
        (["w[1:3]:!w2"], ["w1", "w3"]),
        (["gpu[0]"], ["w1"]),
        (["gpu[-1]"], ["w3"]),
        (["gpu[0:1]"], ["w1", "w2"]),
        (["gpu[1:]"], ["w2", "w3"]),
        (["gpu[:1]"], ["w1", "w2"]),
        (["w*"], ["w1", "w2", "w3", "w10"]),
        (["w?"], ["w1", "w2", "w3"]),
        (["rack*"], ["w1", "w2", "w3", "w10"]),
        (["~w[0-9]$"], ["w1", "w2", "w3"]),
        (["~w1"], ["w1", "w10"]),
        (["gpu", "w1", "login"], ["w1", "w2", "w3", "login"]),
        (["gpu:!gpu"], []),
    ],
)
def test_patterns(patterns, hosts):
    assert [h.name for h in select_hosts(INVENTORY, patterns)] == hosts


@pytest.mark.parametrize(
    "patterns, message",
    [
        (["w9"], "'w9' matches no host (groups: gpu, big, rack1, rack2; hosts: w1, w2, w3, w10, login"),
        (["w1,w9"], "did you mean w1 or w2 or w3"),
        (["gpu:!w9"], "'w9' matches no host"),
        (["gpu:&rackx"], "did you mean rack1 or rack2"),
        (["x*"], "'x*' matches no host"),
        (["gpu[5]"], "gpu has 3 hosts (positions 0 to 2)"),
        (["~w("], "bad regular expression"),
        (["gpu:!"], "'!' and '&' need a host"),
        ([","], "is empty"),
    ],
)
def test_errors_list_what_exists(patterns, message):
    with pytest.raises(PatternError) as error:
        select_hosts(INVENTORY, patterns)
    assert message in str(error.value)


def test_unknown_plain_names_can_be_ad_hoc_hosts():
    hosts = select_hosts(INVENTORY, ["gpu:!w2,new-node"], unknown=Host)
    assert [h.name for h in hosts] == ["w1", "w3", "new-node"]
    assert [h.name for h in INVENTORY.resolve(["node[1:2]"])] == ["node1", "node2"]  # a range of ad-hoc hosts
    with pytest.raises(PatternError):  # an exclusion of an unknown name is a typo, not a host
        select_hosts(INVENTORY, ["gpu:!w9"], unknown=Host)


def test_split_keeps_brackets_and_regex_whole():
    assert split_pattern("gpu:!w3,w[1:3]:&~r[a-z]:x") == ["gpu", "!w3", "w[1:3]", "&~r[a-z]:x"]
