"""provision.engine.names: a user variable no task reads, one edit from one it does, is a typo."""

from pathlib import Path

import pytest

from provision.engine.names import check_entry_keys, check_near_misses, one_edit_apart, own_fields, read_names
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


ENTRY_CASES = [
    # issue 34: her Jupyter would install into the shared prefix as root; her Jupyter would be skipped
    (
        "    - {name: alice, uid: 2001, conda_clonee: true}\n",
        "hosts.yml:5: cluster_users[0] (alice): unknown key conda_clonee; did you mean conda_clone?",
    ),
    (
        "    - name: alice\n      uid: 2001\n      jupyter_prot: 8888\n",
        "hosts.yml:7: cluster_users[0] (alice): unknown key jupyter_prot; did you mean jupyter_port?",
    ),
    (
        "    - {name: alice, uid: 2001, colour: blue}\n",
        "hosts.yml:5: cluster_users[0] (alice): unknown key colour; known: conda_clone, ",
    ),
]


@pytest.mark.parametrize("entry,message", ENTRY_CASES)
def test_an_unknown_key_of_a_cluster_user_is_named_at_its_line(tmp_path: Path, entry, message):
    (tmp_path / "hosts.yml").write_text("hosts:\n  n1: {}\nvars:\n  cluster_users:\n" + entry)
    inv = load_inventory(tmp_path / "hosts.yml")
    with pytest.raises(VariableError) as caught:
        check_entry_keys(Variables(inv), inv.hosts.values())
    assert str(caught.value).startswith(str(tmp_path / message.split(":", 1)[0]) + ":" + message.split(":", 1)[1]), caught.value


def test_unknown_keys_of_exports_and_anaconda_entries_also_in_group_vars(tmp_path: Path):
    (tmp_path / "hosts.yml").write_text("hosts:\n  n1: {}\nvars:\n  nfs_server: n1\n  nfs_exports: [{path: /d, mdoe: rw}]\n")
    inv = load_inventory(tmp_path / "hosts.yml")
    with pytest.raises(VariableError, match=r"hosts\.yml:5: nfs_exports\[0\]: unknown key mdoe; did you mean mode\?"):
        check_entry_keys(Variables(inv), inv.hosts.values())
    (tmp_path / "hosts.yml").write_text("hosts:\n  n1: {}\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("anaconda:\n  - installer: a.sh\n    sha256: x\n    prefx: /opt/a\n")
    inv = load_inventory(tmp_path / "hosts.yml")
    with pytest.raises(VariableError, match=r"group_vars/all\.yml:4: anaconda\[0\]: unknown key prefx; did you mean prefix\?"):
        check_entry_keys(Variables(inv), inv.hosts.values())


def test_a_field_the_users_own_playbook_reads_is_known(tmp_path: Path):
    (tmp_path / "site.yml").write_text(
        "- hosts: all\n  tasks:\n    - name: mail\n"
        '      command: {cmd: "echo {{ item.email }}"}\n      loop: "{{ cluster_users }}"\n'
    )
    (tmp_path / "hosts.yml").write_text("hosts:\n  n1: {}\nvars:\n  cluster_users: [{name: alice, uid: 2001, email: a@b}]\n")
    inv = load_inventory(tmp_path / "hosts.yml")
    check_entry_keys(Variables(inv), inv.hosts.values(), own_fields(load_playbook(tmp_path / "site.yml"), []))
    with pytest.raises(VariableError, match="unknown key email"):  # the shipped roles read no email
        plays = load_playbook(resource_dir("playbooks") / "setup-cluster.yml")
        check_entry_keys(Variables(inv), inv.hosts.values(), own_fields(plays, [resource_dir("templates")]))
