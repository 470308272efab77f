"""playbooks/role-variables.yml (provision.playbook.role_variables) holds what the shipped roles read."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import provision
from provision.playbook.role_variables import load_roles
from provision.resources import resource_dir
from provision.templating import variables_in

# Names the engine itself provides to every task (provision.engine.runner.Runner.context and
# provision.playbook.variables.Variables.for_host), not the inventory.
ENGINE_NAMES = {"item", "hostvars", "groups", "inventory_hostname", "inventory_dir", "play_hosts", "run_tags", "facts"}
ENGINE_NAMES |= {"provision_facts_dir"}


def _strings(node, key=None):
    if isinstance(node, dict):
        for name, value in node.items():
            yield from _strings(value, name)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value, key)
    elif isinstance(node, str):
        yield key, node


def inventory_names(playbook: str) -> set[str]:
    """The top-level variables a playbook reads from the inventory (registered results and the
    engine's own names left out); ``when:`` is a bare expression."""
    data = yaml.safe_load((resource_dir("playbooks") / playbook).read_text())
    names: set[str] = set()
    registered: set[str] = set()
    for key, text in _strings(data):
        if key == "register":
            registered.add(text)
        elif key != "name":
            names |= variables_in("{{ " + text + " }}" if key == "when" else text)
    return names - registered - ENGINE_NAMES


def test_every_variable_a_role_reads_is_declared_and_every_declared_one_is_read():
    roles = load_roles()
    everywhere = {name for role in roles.values() for name in role.variables}
    for role in roles.values():
        declared = {name for name in role.variables if "." not in name and "[]" not in name}
        used = inventory_names(role.playbook)
        # a role may read another role's variable (cluster_users everywhere, jupyter reads anaconda's
        # prefixes): each is declared once, by the role it belongs to
        assert used - everywhere == set(), (role.name, used - everywhere)
        assert declared <= used, (role.name, declared - used)


def test_every_declared_field_is_read_where_the_role_reads_it():
    """A field (``cluster_users[].jupyter_port``, ``slurm.nodes``) is named in its playbook, or in
    the filter that reads it (``slurm_files``) or the cluster users' checks."""
    package = Path(provision.__file__).parent  # the installed package (a wheel keeps playbooks/ inside it)
    sources = "".join(path.read_text() for path in (package / "templating").rglob("*.py"))
    sources += (package / "playbook" / "cluster_users.py").read_text()
    for role in load_roles().values():
        text = (resource_dir("playbooks") / role.playbook).read_text() + sources
        for name in role.variables:
            field = re.split(r"\[\]\.|\.", name)[-1]
            if field != name:
                assert re.search(rf"\b{re.escape(field)}\b", text), (role.name, name)


def test_every_variable_says_what_it_is_and_what_it_changes():
    roles = load_roles()
    assert list(roles) == ["users", "nfs", "anaconda", "jupyter", "slurm"]
    for role in roles.values():
        assert (resource_dir("playbooks") / role.playbook).is_file(), role.playbook
        for variable in role.variables.values():
            assert all((variable.type, variable.default, variable.example, variable.effect)), variable
