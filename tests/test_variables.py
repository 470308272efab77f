"""Variable precedence, -e parsing, cluster_users checks."""

import pytest

from provision.inventory.model import load_inventory
from provision.playbook.variables import VariableError, Variables, check_cluster_users, cluster_users_by_host, parse_extra_vars


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


def layout(tmp_path, files: dict[str, str]):
    """An inventory (w1, w2 in gpu; w3; racks) and the group_vars/host_vars ``files`` beside it."""
    (tmp_path / "hosts.yml").write_text(
        "hosts:\n  w1: {}\n  w2: {}\n  w3.example.com: {}\ngroups:\n  gpu: [w1, w2]\n"
        "racks:\n  - {name: rack1, hosts: [w1]}\nvars:\n  level: inventory\n"
    )
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    inventory = load_inventory(tmp_path / "hosts.yml")
    return inventory, Variables(inventory)


def test_group_vars_all_folders_and_extensions_as_in_ansible(tmp_path):
    inventory, variables = layout(
        tmp_path,
        {
            "group_vars/all.yml": "level: all\nfrom_all: 1\n",
            "group_vars/gpu/10-users.yaml": "level: gpu\ncluster_users: [{name: alice, uid: 2001}]\n",
            "group_vars/gpu/20-more.json": '{"more": true}\n',
            "group_vars/rack1": "rack: one\n",
            "host_vars/w3.example.com": "level: w3\n",
            "host_vars/w2/main.yml": "level: w2\n",
            "group_vars/gpu/.hidden.yml": "level: hidden\n",
            "group_vars/all.yml~": "level: backup\n",
        },
    )
    w1, w2, w3 = (inventory.hosts[n] for n in ("w1", "w2", "w3.example.com"))
    assert variables.for_host(w1)["level"] == "gpu" and variables.for_host(w1)["from_all"] == 1
    assert variables.for_host(w1)["more"] is True and variables.for_host(w1)["rack"] == "one"
    assert variables.for_host(w2)["level"] == "w2" and "rack" not in variables.for_host(w2)
    assert variables.for_host(w3)["level"] == "w3" and variables.for_host(w3)["from_all"] == 1
    assert variables.source(w1, "cluster_users") == str(tmp_path / "group_vars/gpu/10-users.yaml")
    assert variables.source(w3, "cluster_users") is None
    assert variables.warnings == []


def test_vars_files_that_match_nothing_are_warned_about(tmp_path):
    _inventory, variables = layout(tmp_path, {"group_vars/gpus.yml": "a: 1\n", "host_vars/w9.yml": "a: 1\n"})
    assert len(variables.warnings) == 2
    assert "group_vars/gpus.yml: no group 'gpus' in the inventory" in variables.warnings[0]
    assert "(groups: all, gpu, rack1)" in variables.warnings[0]
    assert "host_vars/w9.yml: no host 'w9'" in variables.warnings[1]


def test_bad_group_vars_file_names_file_and_line(tmp_path):
    with pytest.raises(VariableError, match=r"group_vars/all.yml:2: variable name '1x'"):
        layout(tmp_path, {"group_vars/all.yml": "ok: 1\n1x: 2\n"})


@pytest.mark.parametrize(
    "files, message",
    [
        (
            {"group_vars/all.yml": "cluster_users: [{name: a, uid: 2001}, {name: b, uid: 2001}]\n"},
            "group_vars/all.yml (host w1): cluster_users[1]: uid 2001 of b is already the uid of a",
        ),
        (
            {
                "group_vars/gpu.yml": "cluster_users: [{name: a, uid: 2001}]\n",
                "host_vars/w3.example.com.yml": "cluster_users: [{name: a, uid: 2002}]\n",
            },
            "cluster user a has uid/gid 2002/2002 here but 2001/2001 on w1",
        ),
        (
            {
                "group_vars/gpu.yml": "cluster_users: [{name: a, uid: 2001}]\n",
                "host_vars/w3.example.com.yml": "cluster_users: [{name: b, uid: 2001}]\n",
            },
            "uid 2001 of b is the uid of a on w1",
        ),
    ],
)
def test_cluster_users_checked_on_every_host_from_every_layer(tmp_path, files, message):
    inventory, variables = layout(tmp_path, files)
    with pytest.raises(VariableError) as caught:
        cluster_users_by_host(variables, list(inventory.hosts.values()))
    assert message in str(caught.value)


def test_cluster_users_per_host(tmp_path):
    inventory, variables = layout(tmp_path, {"group_vars/gpu.yml": "cluster_users: [{name: a, uid: 2001}]\n"})
    users = cluster_users_by_host(variables, list(inventory.hosts.values()))
    assert users == {"w1": [{"name": "a", "uid": 2001}], "w2": [{"name": "a", "uid": 2001}], "w3.example.com": []}
