"""Variable precedence, -e parsing, cluster_users checks."""

import pytest

from provision.inventory import load_inventory
from provision.playbook.variables import VariableError, Variables, check_cluster_users, parse_extra_vars


def test_precedence(tmp_path):
    (tmp_path / "hosts.yml").write_text(
        "hosts:\n  n1: {vars: {level: host}}\n  n2: {}\ngroups:\n  gpu: [n1, n2]\nvars:\n  level: inventory\n  keep: 1\n"
    )
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpu.yml").write_text("level: group\ngroup_only: yes\n")
    inventory = load_inventory(tmp_path / "hosts.yml")
    variables = Variables(inventory, {"extra": "e"})
    n1, n2 = inventory.hosts["n1"], inventory.hosts["n2"]
    assert variables.for_host(n2)["level"] == "group" and variables.for_host(n1)["level"] == "host"
    assert variables.for_host(n1, {"level": "play"})["level"] == "play"
    assert Variables(inventory, {"level": "extra"}).for_host(n1, {"level": "play"})["level"] == "extra"
    assert variables.for_host(n1)["keep"] == 1 and variables.for_host(n1)["inventory_hostname"] == "n1"


def test_extra_vars(tmp_path):
    (tmp_path / "more.yml").write_text("a: [1, 2]\n")
    assert parse_extra_vars(["x=1", f"@{tmp_path / 'more.yml'}", "y=a=b"]) == {"x": "1", "a": [1, 2], "y": "a=b"}
    for bad in (["novalue"], ["1x=2"], ["@/nonexistent.yml"]):
        with pytest.raises(VariableError):
            parse_extra_vars(bad)


@pytest.mark.parametrize(
    "users,message",
    [
        ([{"name": "a", "uid": 2001}, {"name": "b", "uid": 2001}], "uid 2001 of b is already the uid of a"),
        ([{"name": "a", "uid": 2001}, {"name": "a", "uid": 2002}], "listed twice"),
        ([{"name": "a;reboot", "uid": 1}], "user name"),
        ([{"name": "a"}], "needs name and uid"),
        ([{"name": "a", "uid": "12"}], "not a positive number"),
        ({"name": "a"}, "must be a list"),
    ],
)
def test_cluster_users_checked(users, message):
    with pytest.raises(VariableError) as caught:
        check_cluster_users(users)
    assert message in str(caught.value)
