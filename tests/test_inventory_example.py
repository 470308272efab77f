"""inventory/hosts.example.yml: loads with provision's own loader, shows every field, reaches nobody."""

from __future__ import annotations

import ipaddress
import shutil
from pathlib import Path

from conftest import run_cli
from provision.inventory.model import _HOST_KEYS, load_inventory

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "inventory" / "hosts.example.yml"


def test_example_loads_and_uses_every_field():
    inventory = load_inventory(EXAMPLE)
    assert inventory.hosts and inventory.groups and inventory.racks and inventory.vars
    text = EXAMPLE.read_text()
    for section in ("defaults:", "hosts:", "groups:", "racks:", "vars:"):
        assert f"\n{section}" in text, section
    used = {
        "address": any(h.address for h in inventory.hosts.values()),
        "user": any(h.user for h in inventory.hosts.values()),
        "port": any(h.port for h in inventory.hosts.values()),
        "key": any(h.key for h in inventory.hosts.values()),
        "vars": any(h.vars for h in inventory.hosts.values()),
    }
    assert set(used) == _HOST_KEYS and all(used.values()), used
    assert inventory.hosts["sys-89075"].port == 2222 and inventory.hosts["sys-89075"].user == "mpi"  # from defaults
    assert inventory.hosts["sys-89076"].user == "hpcadmin"  # a host's own field wins
    assert inventory.hosts["localhost"].is_local
    assert inventory.rack_order() == ["sys-89074", "sys-89075", "sys-89076", "sys-89077"]


def test_example_addresses_are_documentation_addresses():
    documentation = [ipaddress.ip_network("192.0.2.0/24"), ipaddress.ip_network("2001:db8::/32")]
    for host in load_inventory(EXAMPLE).hosts.values():
        address = (host.address or host.name).strip("[]")
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            assert address.endswith(".example.org") or "." not in address, address
        else:
            assert any(ip in network for network in documentation), address


def test_example_is_not_the_default_inventory(tmp_path):
    # Beside an inventory/ folder holding only the example, no inventory is read without -i.
    (tmp_path / "inventory").mkdir()
    shutil.copy2(EXAMPLE, tmp_path / "inventory" / "hosts.example.yml")
    shown = run_cli("inventory", "show", cwd=tmp_path)
    assert shown.returncode == 2 and "no inventory" in shown.stderr and "sys-89074" not in shown.stdout
    shown = run_cli("inventory", "show", "-i", "inventory/hosts.example.yml", cwd=tmp_path)
    assert shown.returncode == 0 and "rack 1 rack1: sys-89074, sys-89075" in shown.stdout
