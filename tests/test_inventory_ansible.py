"""Ansible inventory import, INI and YAML."""

import pytest

from provision.errors import InventoryError
from provision.inventory.ansible import expand_host_range, import_ansible_inventory

INI = """\
# comment
[rack1]
node[01:02] ansible_user=mpi
[rack2]
node03 ansible_host=10.0.0.3 ansible_port=2222 gpu_model=V100
[gpu:children]
rack1
rack2
[all:vars]
ansible_ssh_private_key_file=~/.ssh/id_ed25519
"""

YAML = """\
all:
  vars:
    ansible_user: mpi
  children:
    rack_a:
      hosts:
        h1: {ansible_host: 10.1.0.1}
        h2:
    rack_b:
      hosts:
        h3: {ansible_port: 2200}
"""


def test_ini(tmp_path):
    path = tmp_path / "hosts"
    path.write_text(INI)
    inv = import_ansible_inventory(path)
    assert list(inv.hosts) == ["node01", "node02", "node03"]
    assert inv.hosts["node03"].address == "10.0.0.3" and inv.hosts["node03"].port == 2222
    assert inv.hosts["node03"].vars == {"gpu_model": "V100"}
    assert inv.hosts["node01"].key == "~/.ssh/id_ed25519"
    assert [r.name for r in inv.racks] == ["rack1", "rack2"]
    assert inv.groups["gpu"] == ("node01", "node02", "node03")


def test_yaml(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text(YAML)
    inv = import_ansible_inventory(path)
    assert inv.hosts["h1"].address == "10.1.0.1" and inv.hosts["h3"].port == 2200 and inv.hosts["h2"].user == "mpi"
    assert inv.rack_order() == ["h1", "h2", "h3"]


def test_ranges():
    assert expand_host_range("n[08:10]") == ["n08", "n09", "n10"]
    assert expand_host_range("r[a:b]n[1:2]") == ["ran1", "ran2", "rbn1", "rbn2"]


def test_bad_line_named(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("[ok]\nnode1\n[bad section\n")
    with pytest.raises(InventoryError, match=f"{path}:3:"):
        import_ansible_inventory(path)
    path.write_text("[g]\nnode1 ansible_host=$(reboot)\n")
    with pytest.raises(InventoryError, match=f"{path}:2:"):
        import_ansible_inventory(path)


def _big_ini(hosts: int, racks: int) -> str:
    per_rack = hosts // racks
    lines = []
    for rack in range(racks):
        lines.append(f"[rack{rack:03d}]")
        lines += [f"n{rack * per_rack + i:05d} ansible_host=10.{rack}.0.{i} gpus={i % 4}" for i in range(per_rack)]
        lines.append(f"[rack{rack:03d}:vars]\nswitch=sw{rack:03d}\nrole=worker")
    lines.append("[login]\nn00000 role=login")  # a host in two groups: the later group's vars win, its own win over both
    lines.append("[login:vars]\nshell=bash")
    lines.append("[gpu:children]\n" + "\n".join(f"rack{rack:03d}" for rack in range(racks)))
    lines.append("[site:children]\ngpu\nlogin")  # two levels of children, overlapping members
    lines.append("[all:vars]\nansible_user=mpi\nansible_port=2222")
    return "\n".join(lines) + "\n"


def test_big_inventory_imported_exactly(tmp_path):
    """8192 hosts in 32 racks (the bench's size; bench/inventory_import_1024.py times it)."""
    from provision.inventory.model import inventory_to_yaml, load_inventory

    path = tmp_path / "hosts.ini"
    path.write_text(_big_ini(8192, 32))
    from provision.inventory.ansible import read_ansible_inventory

    imported = read_ansible_inventory(path)
    inv = imported.inventory
    names = [f"n{i:05d}" for i in range(8192)]
    assert list(inv.hosts) == names
    assert [r.name for r in inv.racks] == [f"rack{r:03d}" for r in range(32)]
    assert inv.rack_order() == names and all(len(r.hosts) == 256 for r in inv.racks)
    assert inv.groups["gpu"] == tuple(names) and inv.groups["site"] == tuple(names)
    assert inv.groups["login"] == ("n00000",)
    last = inv.hosts["n08191"]
    assert (last.address, last.user, last.port) == ("10.31.0.255", "mpi", 2222)
    # Each variable stays where it was written: a host's own with it, a group's in its group variables.
    assert last.vars == {"gpus": 3}
    assert inv.hosts["n00000"].vars == {"gpus": 0, "role": "login"}
    assert imported.group_vars["rack031"] == {"switch": "sw031", "role": "worker"}
    assert imported.group_vars["login"] == {"shell": "bash"} and len(imported.group_vars) == 33
    out = tmp_path / "hosts.yml"
    out.write_text(inventory_to_yaml(inv))
    again = load_inventory(out)
    assert again.hosts == inv.hosts and again.racks == inv.racks and again.groups == inv.groups


def test_children_cycle_named(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("[a]\nh1\n[a:children]\nb\n[b:children]\nc\n[c:children]\na\n")
    with pytest.raises(InventoryError, match="contains itself"):
        import_ansible_inventory(path)


def test_group_and_all_vars_stay_where_written_and_ssh_args_are_dropped_with_advice(tmp_path):
    from provision.inventory.ansible import read_ansible_inventory

    path = tmp_path / "hosts"
    path.write_text(
        "[gpu]\nw1 ansible_host=10.0.0.1 ansible_ssh_common_args='-o ProxyJump=bastion'\nw2\n"
        "[gpu:vars]\ncuda_version=12\nansible_user=mpi\n[all:vars]\ndataset_dir=/data\nansible_port=2222\n"
    )
    imported = read_ansible_inventory(path)
    inv = imported.inventory
    assert inv.vars == {"dataset_dir": "/data"}
    assert imported.group_vars == {"gpu": {"cuda_version": 12}}
    assert all(host.vars == {} for host in inv.hosts.values())  # nothing copied into every host
    assert inv.hosts["w2"].user == "mpi" and inv.hosts["w2"].port == 2222  # connection vars still reach each host
    (warning,) = imported.warnings
    assert "ansible_ssh_common_args" in warning and "ProxyJump bastion" in warning and "host w1" in warning


def test_a_host_line_with_a_semicolon_is_refused_with_its_line(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("[g]\nok1\nw1;rm ansible_host=1.2.3.4\n")
    with pytest.raises(InventoryError, match=f"{path}:3: host name 'w1;rm'"):
        import_ansible_inventory(path)


def test_cli_import_writes_group_vars_beside_the_output(tmp_path):
    from conftest import run_cli

    source = tmp_path / "hosts"
    source.write_text("[gpu]\nw1\n[gpu:vars]\ncuda_version=12\n[all:vars]\nsite=lab\n")
    done = run_cli("inventory", "import", str(source), "-o", str(tmp_path / "out" / "hosts.yml"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "group_vars" / "gpu.yml").read_text() == "cuda_version: 12\n"
    assert "site: lab" in (tmp_path / "out" / "hosts.yml").read_text()
    done = run_cli("inventory", "import", str(source))
    assert "group_vars" in done.stderr and "site: lab" in done.stdout
