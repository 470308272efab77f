"""The README's quick-start inventory and the documented own-playbook example (docs/examples/site.yml)
are read by the real loaders and pass `setup-cluster --syntax-check` together."""

from __future__ import annotations

import re
from pathlib import Path

from test_authorized_keys import ED

from conftest import run_cli
from provision.inventory.model import load_inventory
from provision.operations import OPERATIONS
from provision.playbook.model import load_playbook
from provision.playbook.role_variables import load_roles

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "site.yml"


def quick_start_inventory() -> str:
    """The ``yaml`` block of the README's quick start (the one inventory that sets every role)."""
    text = (ROOT / "README.md").read_text()
    return re.search(r"One inventory\*\*.*?```yaml\n(.*?)```", text, re.DOTALL).group(1)


def test_the_quick_start_inventory_sets_every_role(tmp_path):
    path = tmp_path / "inventory" / "hosts.yml"
    path.parent.mkdir()
    path.write_text(quick_start_inventory())
    inventory = load_inventory(path)
    assert list(inventory.hosts) == ["node01", "node02", "node03"]
    assert [rack.hosts for rack in inventory.racks] == [("node01", "node02", "node03")]
    users = inventory.vars["cluster_users"]
    for role in load_roles().values():
        top = {name for name in role.variables if "[]" not in name and "." not in name}
        fields = {name.split("[].")[1] for name in role.variables if name.startswith("cluster_users[].")}
        assert top & set(inventory.vars) or any(fields & set(user) for user in users), f"the quick start leaves {role.name} unset"


def test_the_own_playbook_example_loads_with_the_playbook_loader():
    plays = load_playbook(EXAMPLE)
    tasks = [task for play in plays for task in play.tasks]
    assert [play.hosts for play in plays] == [("gpu",)]
    assert {task.op for task in tasks} <= set(OPERATIONS) and len(tasks) == 4


def test_the_own_playbook_example_passes_the_syntax_check_on_the_quick_start_inventory(tmp_path):
    """Every task rendered for every host of the README's inventory, no host touched."""
    path = tmp_path / "inventory" / "hosts.yml"
    path.parent.mkdir()
    path.write_text(quick_start_inventory())
    (tmp_path / "inventory" / "keys").mkdir()  # the quick start's step 2 puts alice's public key there
    (tmp_path / "inventory" / "keys" / "alice.pub").write_text(ED + " alice@laptop\n")
    done = run_cli("setup-cluster", "-i", str(path), "--playbook", str(EXAMPLE), "--syntax-check", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"playbook: {EXAMPLE}: syntax OK (1 plays, 4 tasks checked for 3 hosts)" in done.stdout, done.stdout
