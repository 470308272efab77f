"""Inventory loading: structure, racks, and errors with file:line."""

import textwrap

import pytest

from provision.errors import InventoryError
from provision.inventory.model import Inventory, inventory_to_yaml, load_inventory


def write(tmp_path, text):
    path = tmp_path / "hosts.yml"
    path.write_text(textwrap.dedent(text))
    return path


GOOD = """\
defaults:
  user: mpi
hosts:
  n1: {address: 10.0.0.1}
  n2: {port: 2222, key: ~/.ssh/id_ed25519}
  n3:
groups:
  gpu: [n1, n2]
racks:
  - {name: r1, hosts: [n1, n2]}
  - {name: r2, hosts: [n3]}
vars:
  dataset_dir: /data
"""


def test_load_and_resolve(tmp_path):
    inv = load_inventory(write(tmp_path, GOOD))
    assert inv.hosts["n2"].port == 2222 and inv.hosts["n2"].user == "mpi"
    assert inv.rack_order() == ["n1", "n2", "n3"]
    assert [h.name for h in inv.resolve(["gpu", "n3", "n1"])] == ["n1", "n2", "n3"]
    assert [h.name for h in inv.resolve([])] == ["n1", "n2", "n3"]
    assert inv.resolve(["adhoc-host"])[0].address is None


def test_round_trip(tmp_path):
    inv = load_inventory(write(tmp_path, GOOD))
    again = load_inventory(write(tmp_path, inventory_to_yaml(inv)))
    assert again.hosts == inv.hosts and again.racks == inv.racks and again.groups == inv.groups


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("hosts:\n  n1: {address: 'a;rm -rf /'}\n", 2, "not a host name or IP"),
        ("hosts:\n  ok: {}\n  'bad$(x)': {}\n", 3, "may only hold"),
        ("hosts:\n  n1:\n    user: 'root; id'\n", 3, "not a valid user"),
        ("hosts:\n  n1:\n    port: 70000\n", 3, "1-65535"),
        ("hosts:\n  n1:\n    colour: red\n", 3, "unknown field"),
        ("hosts:\n  n1: {}\nracks:\n  - {name: r1, hosts: [n1, n9]}\n", 4, "'n9' is not a host"),
        ("hosts:\n  n1: {}\ngroups:\n  g: [n1]\n  all: [n1]\n", 5, "clashes"),
        ("hosts:\n  n1: {\n", 3, "YAML syntax"),
        ("hostz: {}\n", 1, "unknown section"),
    ],
)
def test_errors_name_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as error:
        load_inventory(path)
    assert str(error.value).startswith(f"{path}:{line}:"), str(error.value)
    assert message in str(error.value)


def test_unsafe_command_line_host_rejected():
    with pytest.raises(InventoryError, match="may only hold"):
        Inventory().resolve(["node1;reboot"])


def test_unreadable_file(tmp_path):
    with pytest.raises(InventoryError, match="cannot read"):
        load_inventory(tmp_path / "missing.yml")


def test_show_without_an_inventory_says_how_to_make_one(tmp_path):
    from conftest import run_cli

    done = run_cli("inventory", "show", cwd=tmp_path)
    assert done.returncode == 2 and "no inventory" in done.stderr and "inventory example" in done.stderr
    assert done.stdout == ""
    # Issue 34: the hint works when pasted, in a folder without inventory/ (the shell's > needs the folder).
    import re
    import subprocess
    import sys
    from pathlib import Path

    hint = re.search(r"write one \(`([^`]+)`", done.stderr).group(1)
    bin_dir = Path(sys.executable).parent  # the provision beside this interpreter
    pasted = subprocess.run(
        ["sh", "-c", hint], cwd=tmp_path, capture_output=True, text=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin"}
    )
    assert pasted.returncode == 0 and "racks:" in (tmp_path / "inventory" / "hosts.yml").read_text(), pasted.stderr


def test_show_json_is_ansible_inventory_list_and_vars_are_shown(tmp_path):
    import json

    from conftest import run_cli

    path = write(
        tmp_path,
        """\
        hosts:
          w1: {address: 10.0.0.1, user: mpi, vars: {gpu_model: V100}}
          w2:
          login:
        groups:
          gpu: [w1, w2]
        racks:
          - {name: rack1, hosts: [w1]}
        vars:
          dataset_dir: /data
        """,
    )
    done = run_cli("inventory", "show", "-i", str(path), "--json")
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    assert listing["gpu"] == {"hosts": ["w1", "w2"]} and listing["rack1"] == {"hosts": ["w1"]}
    assert listing["ungrouped"] == {"hosts": ["login"]} and set(listing["all"]["children"]) == {"ungrouped", "gpu", "rack1"}
    assert listing["_meta"]["hostvars"]["w1"] == {
        "dataset_dir": "/data",
        "gpu_model": "V100",
        "ansible_host": "10.0.0.1",
        "ansible_user": "mpi",
    }
    done = run_cli("inventory", "show", "-i", str(path), "--vars")
    assert 'var dataset_dir = "/data"' in done.stdout and 'host w1 var gpu_model = "V100"' in done.stdout


def test_an_ansible_ini_file_given_to_i_says_to_import_it(tmp_path):
    from conftest import run_cli

    ini = tmp_path / "hosts"
    ini.write_text("[gpu]\nw1 ansible_host=10.0.0.1\n")
    done = run_cli("inventory", "show", "-i", str(ini))
    assert done.returncode == 2 and f"provision inventory import {ini}" in done.stderr and "YAML syntax" not in done.stderr


def test_example_inventory_is_printed_from_the_installed_package(tmp_path):
    from conftest import run_cli

    done = run_cli("inventory", "example", cwd=tmp_path)
    assert done.returncode == 0 and "racks:" in done.stdout
    example = tmp_path / "hosts.yml"
    example.write_text(done.stdout)
    assert load_inventory(example).racks


def test_show_vars_and_json_include_group_vars_and_host_vars_as_setup_cluster_reads_them(tmp_path):
    """Issue 34: `inventory show --vars` and `--json` left out group_vars/ and host_vars/ (setup-cluster
    reads them; `ansible-inventory --list` shows them): each host's variables merged as setup-cluster
    merges them, and --vars names the file each comes from."""
    import json

    from conftest import run_cli

    path = tmp_path / "hosts.yml"
    path.write_text(
        "hosts:\n  w1: {address: 10.0.0.1}\n  w2: {address: 10.0.0.2, vars: {shell_of: w2}}\n"
        "groups:\n  gpu: [w1, w2]\nvars:\n  dataset_dir: /data\n  conda_path: profile\n"
    )
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpu.yml").write_text("conda_path: module\nnfs_server: w1\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "w2.yml").write_text("nfs_server: w2\n")
    (tmp_path / "group_vars" / "cpu.yml").write_text("x: 1\n")  # names no group: said, applies to none
    done = run_cli("inventory", "show", "-i", str(path), "--json")
    assert done.returncode == 0, done.stderr
    hostvars = json.loads(done.stdout)["_meta"]["hostvars"]
    assert hostvars["w1"] == {"dataset_dir": "/data", "conda_path": "module", "nfs_server": "w1", "ansible_host": "10.0.0.1"}
    assert (
        hostvars["w2"]["nfs_server"] == "w2" and hostvars["w2"]["shell_of"] == "w2" and hostvars["w2"]["conda_path"] == "module"
    )
    assert "cpu.yml: no group 'cpu' in the inventory" in done.stderr
    shown = run_cli("inventory", "show", "-i", str(path), "--vars").stdout
    assert f'group gpu var conda_path = "module"  ({tmp_path / "group_vars" / "gpu.yml"})' in shown
    assert f'host w2 var nfs_server = "w2"  ({tmp_path / "host_vars" / "w2.yml"})' in shown
    assert 'var conda_path = "profile"' in shown and 'host w2 var shell_of = "w2"' in shown
