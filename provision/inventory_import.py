"""Read an Ansible inventory (INI or YAML) into provision's :class:`Inventory`.

Maps ``ansible_host``/``ansible_user``/``ansible_port``/``ansible_ssh_private_key_file`` to
address/user/port/key, keeps other host variables, expands host ranges (``node[01:16]``),
flattens ``:children``, and turns groups named ``rack*`` into racks, in file order.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from provision.errors import InventoryError
from provision.inventory import HOST_NAME, Host, Inventory, Rack, _host_fields
from provision.inventory_patterns import expand_host_range
from provision.yaml_lines import load_yaml_with_lines

_CONNECTION_VARS = {
    "ansible_host": "address",
    "ansible_ssh_host": "address",
    "ansible_user": "user",
    "ansible_ssh_user": "user",
    "ansible_port": "port",
    "ansible_ssh_port": "port",
    "ansible_ssh_private_key_file": "key",
    "ansible_private_key_file": "key",
}
_RACK = re.compile(r"^rack", re.IGNORECASE)


def _coerce(value: str) -> Any:
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


class _Builder:
    """Collects hosts/groups from either format, then builds the checked Inventory."""

    def __init__(self, path: Path):
        self.path = path
        self.host_vars: dict[str, dict[str, Any]] = {}
        self.host_lines: dict[str, int] = {}
        self.groups: dict[str, list[str]] = {}
        self.children: dict[str, list[str]] = {}
        self.group_vars: dict[str, dict[str, Any]] = {}
        self._in_group: dict[str, set[str]] = {}  # group -> its direct members, for O(1) "already there?"

    def add_host(self, pattern: str, variables: dict[str, Any], line: int, group: str | None) -> None:
        """Record the hosts of ``pattern`` (ranges expanded) with their variables, in ``group``."""
        for name in expand_host_range(pattern):
            if not HOST_NAME.match(name):
                raise InventoryError(str(self.path), line, f"host name {name!r} may only hold letters, digits, '.', '_', '-'")
            self.host_vars.setdefault(name, {}).update(variables)
            self.host_lines.setdefault(name, line)
            if group and group != "all":
                members = self.groups.setdefault(group, [])
                known = self._in_group.setdefault(group, set(members))
                if name not in known:
                    known.add(name)
                    members.append(name)

    def members(self, group: str, stack: tuple[str, ...] = (), memo: dict[str, list[str]] | None = None) -> list[str]:
        """Hosts of ``group`` and of its children, in order; a cycle is an error.

        With ``memo`` each group is expanded once (linear in the inventory's size, not quadratic).
        """
        if memo is not None and group in memo:
            return memo[group]
        if group in stack:
            raise InventoryError(str(self.path), None, f"group {group} contains itself through :children")
        names = list(self.groups.get(group, []))
        seen = set(names)
        for child in self.children.get(group, []):
            for name in self.members(child, stack + (group,), memo):
                if name not in seen:
                    seen.add(name)
                    names.append(name)
        if memo is not None:
            memo[group] = names
        return names

    def build(self) -> Inventory:
        """Check every host through provision's own rules and make the :class:`Inventory`."""
        memo: dict[str, list[str]] = {}
        groups_of: dict[str, list[str]] = {}  # host -> the groups holding it, in group order
        for group in list(self.groups) + list(self.children):
            for name in self.members(group, (), memo):
                groups_of.setdefault(name, []).append(group)
        hosts: dict[str, Host] = {}
        for name, variables in self.host_vars.items():
            merged: dict[str, Any] = {}
            for group in groups_of.get(name, ()):
                merged.update(self.group_vars.get(group, {}))
            merged = {**self.group_vars.get("all", {}), **merged, **variables}
            fields: dict[str, Any] = {}
            extra: dict[str, Any] = {}
            for key, value in merged.items():
                if key in _CONNECTION_VARS:
                    fields[_CONNECTION_VARS[key]] = value
                else:
                    extra[key] = value
            if extra:
                fields["vars"] = extra
            hosts[name] = _host_fields(self.path, name, fields, self.host_lines[name], {})
        all_groups = list(dict.fromkeys(list(self.groups) + list(self.children)))
        groups = {g: tuple(self.members(g, (), memo)) for g in all_groups if g not in ("all", "ungrouped")}
        racks = tuple(Rack(g, members) for g, members in groups.items() if _RACK.match(g) and members)
        return Inventory(hosts, groups, racks, {}, None)


def _parse_ini(path: Path, text: str) -> Inventory:
    builder = _Builder(path)
    section, kind = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].split(";", 1)[0].strip() if not raw.lstrip().startswith(("#", ";")) else ""
        if not line:
            continue
        if line.startswith("["):
            match = re.fullmatch(r"\[([A-Za-z0-9_.-]+)(?::(vars|children))?\]", line)
            if not match:
                raise InventoryError(str(path), number, f"bad section header {line!r}")
            section, kind = match.group(1), match.group(2) or "hosts"
            if kind == "hosts":
                builder.groups.setdefault(section, [])
            continue
        if kind == "vars":
            key, sep, value = line.partition("=")
            if not sep:
                raise InventoryError(str(path), number, f"expected key=value in [{section}:vars]")
            builder.group_vars.setdefault(section, {})[key.strip()] = _coerce(value.strip())
        elif kind == "children":
            builder.children.setdefault(section, []).append(line)
        else:
            pattern, *assignments = line.split()
            variables = {}
            for assignment in assignments:
                key, sep, value = assignment.partition("=")
                if not sep:
                    raise InventoryError(str(path), number, f"expected key=value after host, got {assignment!r}")
                variables[key] = _coerce(value)
            builder.add_host(pattern, variables, number, section)
    return builder.build()


def _walk_yaml(builder: _Builder, group: str, body: Any, line: int) -> None:
    if body is None:
        return
    if not isinstance(body, dict):
        raise InventoryError(str(builder.path), line, f"group {group}: expected hosts:/vars:/children:")
    for name, variables in (body.get("hosts") or {}).items():
        host_line = body["hosts"].key_lines.get(name, line)
        builder.add_host(str(name), dict(variables or {}), host_line, group)
    builder.group_vars.setdefault(group, {}).update(body.get("vars") or {})
    for child, child_body in (body.get("children") or {}).items():
        builder.children.setdefault(group, []).append(child)
        builder.groups.setdefault(child, [])
        _walk_yaml(builder, child, child_body, body["children"].key_lines.get(child, line))


def import_ansible_inventory(path: Path) -> Inventory:
    """Read an Ansible INI or YAML inventory file; errors name the file and line."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise InventoryError(str(path), None, f"cannot read: {error.strerror}") from None
    stripped = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if path.suffix in (".yml", ".yaml") or (stripped and stripped[0].rstrip().endswith(":")):
        data = load_yaml_with_lines(path)
        if not isinstance(data, dict):
            raise InventoryError(str(path), 1, "expected a YAML mapping of groups (all: ...)")
        builder = _Builder(path)
        for group, body in data.items():
            _walk_yaml(builder, str(group), body, data.key_lines.get(group, 1))
        return builder.build()
    return _parse_ini(path, text)
