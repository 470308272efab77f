"""provision.engine.names: a user variable no task reads, one edit from one it does, is a typo."""

from pathlib import Path

import pytest

from provision.engine.names import check_near_misses, one_edit_apart, read_names
from provision.inventory.model import load_inventory
from provision.playbook.model import load_playbook
from provision.playbook.variables import VariableError, Variables
from provision.resources import resource_dir


@pytest.mark.parametrize(
    "a,b,close",
    [
        ("nfs_export", "nfs_exports", True),  # one letter short (issue 26)
        ("nfs_exportss", "nfs_exports", True),
        ("nsf_server", "nfs_server", True),  # two letters swapped
        ("anacond", "anaconda", True),
        ("nfs_server", "nfs_clients", False),
        ("shared_home", "shared_home", False),
        ("jupyter", "anaconda", False),
    ],
)
def test_one_edit_apart(a, b, close):
    assert one_edit_apart(a, b) is close and one_edit_apart(b, a) is close


def test_the_builtin_playbook_reads_every_role_variable():
    plays = load_playbook(resource_dir("playbooks") / "setup-cluster.yml")
    names = read_names(plays, [resource_dir("templates")])
    assert {"nfs_exports", "nfs_server", "cluster_users", "anaconda", "shared_home", "nfs_clients"} <= names


def test_typo_named_at_its_line_and_own_names_left_alone(tmp_path: Path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("hosts:\n  n1: {}\nvars:\n  my_site_name: x\n  nfs_server: n1\n  nfs_export: [{path: /d}]\n")
    plays = load_playbook(resource_dir("playbooks") / "setup-cluster.yml")
    known = read_names(plays, [resource_dir("templates")])
    inv = load_inventory(inventory)
    with pytest.raises(VariableError, match=r"hosts\.yml:6: variable nfs_export .* did you mean nfs_exports\?"):
        check_near_misses(Variables(inv), inv.hosts.values(), known)
    inventory.write_text("hosts:\n  n1: {}\nvars:\n  my_site_name: x\n  nfs_server: n1\n")
    inv = load_inventory(inventory)
    check_near_misses(Variables(inv), inv.hosts.values(), known)  # my_site_name is near nothing: the user's own
