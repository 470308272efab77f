"""Ansible inventory import, INI and YAML."""

import pytest

from provision.errors import InventoryError
from provision.inventory_import import expand_host_range, import_ansible_inventory

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
