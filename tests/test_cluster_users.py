"""The cluster users of a run: present users per host from group_vars/host_vars, the hosts
without cluster_users, and --rotate-user-keys checked against them."""

import pytest

from provision.inventory.model import load_inventory
from provision.playbook.cluster_users import rotation_names, run_users
from provision.playbook.variables import VariableError, Variables


def layout(tmp_path, files: dict[str, str]):
    """An inventory (w1, w2 in gpu; w3) and the group_vars/host_vars ``files`` beside it."""
    (tmp_path / "hosts.yml").write_text("hosts:\n  w1: {}\n  w2: {}\n  w3.example.com: {}\ngroups:\n  gpu: [w1, w2]\n")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    inventory = load_inventory(tmp_path / "hosts.yml")
    return inventory, Variables(inventory)


def test_present_users_per_host_from_group_and_host_vars(tmp_path):
    inventory, variables = layout(
        tmp_path,
        {
            "group_vars/gpu.yml": "cluster_users: [{name: alice, uid: 2001}, {name: bob, uid: 2002, state: absent}]\n",
            "host_vars/w2.yml": "cluster_users: [{name: alice, uid: 2001}, {name: carol, uid: 2003}]\n",
        },
    )
    users = run_users(variables, list(inventory.hosts.values()))
    assert {host: [u["name"] for u in us] for host, us in users.by_host.items()} == {
        "w1": ["alice"],
        "w2": ["alice", "carol"],
        "w3.example.com": [],
    }
    assert [u["name"] for u in users.users] == ["alice", "carol"] and users.unset == ["w3.example.com"]
    users.check_rotation(["carol"])  # only in host_vars: still a cluster user of this run
    with pytest.raises(VariableError, match=r"--rotate-user-keys: bob, zed not in cluster_users \(present\)"):
        users.check_rotation(["zed", "bob", "alice"])  # bob left: his keys are revoked, not rotated


def test_rotation_names_and_limit():
    assert rotation_names(" alice, ,bob ", False) == ["alice", "bob"] and rotation_names(None, True) == []
    with pytest.raises(VariableError, match="run it without --limit"):
        rotation_names("alice", True)
