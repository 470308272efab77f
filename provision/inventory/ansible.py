"""Read an Ansible inventory (INI or YAML) into provision's :class:`Inventory`.

Maps ``ansible_host``/``ansible_user``/``ansible_port``/``ansible_ssh_private_key_file`` to
address/user/port/key, keeps other host variables, expands host ranges (``node[01:16]``),
flattens ``:children``, and turns groups named ``rack*`` into racks, in file order.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.errors import InventoryError
from provision.inventory.model import HOST_NAME, Host, Inventory, Rack, _host_fields
from provision.inventory.patterns import expand_host_range
from provision.text import shown_value
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
_SSH_ARGS = {"ansible_ssh_common_args", "ansible_ssh_extra_args", "ansible_ssh_args"}
_PROXY_JUMP = re.compile(r"(?:-o\s*ProxyJump[= ]\s*|-J\s*)([^\s'\"]+)", re.IGNORECASE)
_RACK = re.compile(r"^rack", re.IGNORECASE)


def _coerce(value: str) -> Any:
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


@dataclass(frozen=True)
class ImportedInventory:
    """What an Ansible inventory becomes: the inventory (``all``'s variables as ``vars:``), each
    group's own variables (for ``group_vars/<group>.yml``), and warnings about what was dropped."""

    inventory: Inventory
    group_vars: dict[str, dict[str, Any]]
    warnings: tuple[str, ...]


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
                raise InventoryError(
                    str(self.path), line, f"host name {shown_value(name)} may only hold letters, digits, '.', '_', '-'"
                )
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

    def build(self) -> ImportedInventory:
        """Check every host through provision's own rules and make the :class:`ImportedInventory`.

        Connection variables (ansible_host, _user, _port, _ssh_private_key_file) become each
        host's fields, from its groups and ``all`` as Ansible applies them; other variables stay
        where they were written: ``all``'s in ``vars:``, a group's in its group variables, a
        host's with the host. SSH arguments are dropped with a warning (ssh_config holds them)."""
        memo: dict[str, list[str]] = {}
        groups_of: dict[str, list[str]] = {}  # host -> the groups holding it, in group order
        for group in list(self.groups) + list(self.children):
            for name in self.members(group, (), memo):
                groups_of.setdefault(name, []).append(group)
        warnings: list[str] = []
        scoped: dict[str, dict[str, Any]] = {}  # group -> its variables, SSH arguments taken out
        for group, variables in self.group_vars.items():
            scoped[group] = self._without_ssh_args(variables, f"group {group}", warnings)
        hosts: dict[str, Host] = {}
        for name, own in self.host_vars.items():
            own = self._without_ssh_args(own, f"host {name}", warnings)
            connection: dict[str, Any] = {}
            for group in ("all", *groups_of.get(name, ())):
                connection.update({k: v for k, v in scoped.get(group, {}).items() if k in _CONNECTION_VARS})
            connection.update({k: v for k, v in own.items() if k in _CONNECTION_VARS})
            fields: dict[str, Any] = {_CONNECTION_VARS[key]: value for key, value in connection.items()}
            extra = {k: v for k, v in own.items() if k not in _CONNECTION_VARS}
            if extra:
                fields["vars"] = extra
            hosts[name] = _host_fields(self.path, name, fields, self.host_lines[name], {})
        all_groups = list(dict.fromkeys(list(self.groups) + list(self.children)))
        groups = {g: tuple(self.members(g, (), memo)) for g in all_groups if g not in ("all", "ungrouped")}
        racks = tuple(Rack(g, members) for g, members in groups.items() if _RACK.match(g) and members)
        site_vars = {k: v for k, v in scoped.get("all", {}).items() if k not in _CONNECTION_VARS}
        group_vars = {
            group: plain
            for group, variables in scoped.items()
            if group != "all" and (plain := {k: v for k, v in variables.items() if k not in _CONNECTION_VARS})
        }
        return ImportedInventory(Inventory(hosts, groups, racks, site_vars, None), group_vars, tuple(warnings))

    def _without_ssh_args(self, variables: dict[str, Any], where: str, warnings: list[str]) -> dict[str, Any]:
        """``variables`` less Ansible's SSH argument variables, each dropped with a warning saying
        what to put in ssh_config instead (a ProxyJump becomes a ``ProxyJump`` line)."""
        kept = {}
        for key, value in variables.items():
            if key not in _SSH_ARGS:
                kept[key] = value
                continue
            jump = _PROXY_JUMP.search(str(value))
            advice = f"ProxyJump {jump.group(1)}" if jump else "the same options"
            warnings.append(
                f"{self.path}: {where}: {key}={shown_value(value)} dropped: provision reads SSH options from ssh_config; "
                f"put {advice} under a Host line for these hosts in ~/.ssh/config (or a file given with --ssh-config)"
            )
        return kept


def _parse_ini(path: Path, text: str) -> ImportedInventory:
    builder = _Builder(path)
    section, kind = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), start=1):
        # Comments: a line starting with '#' or ';', or '#' after a space; ';' inside a line is
        # not one (in Ansible neither), so `w1;rm ...` is refused as a host name, not cut to `w1`.
        line = re.split(r"\s#", raw, maxsplit=1)[0].strip() if not raw.lstrip().startswith(("#", ";")) else ""
        if not line:
            continue
        if line.startswith("["):
            match = re.fullmatch(r"\[([A-Za-z0-9_.-]+)(?::(vars|children))?\]", line)
            if not match:
                raise InventoryError(str(path), number, f"bad section header {shown_value(line)}")
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
            try:
                pattern, *assignments = shlex.split(line)  # values may be quoted: key='-o a=b c'
            except ValueError as error:
                raise InventoryError(str(path), number, f"cannot split host line: {error}") from None
            variables = {}
            for assignment in assignments:
                key, sep, value = assignment.partition("=")
                if not sep:
                    raise InventoryError(str(path), number, f"expected key=value after host, got {shown_value(assignment)}")
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
    return read_ansible_inventory(path).inventory


def read_ansible_inventory(path: Path) -> ImportedInventory:
    """Read an Ansible INI or YAML inventory file, with its group variables and warnings;
    errors name the file and line."""
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


@dataclass
class Conversion:
    """``provision inventory import``: the inventory as provision's YAML (``text``), what was
    dropped or left out (``warnings``), and the files written (``(what, path, where the file it
    replaced was kept)``), none without an output file."""

    text: str
    warnings: list[str]
    written: list[tuple[str, Path, Path | None]]


def convert(source: Path, output: Path | None) -> Conversion:
    """Convert the Ansible inventory ``source``: with ``output``, write it there (atomically; an
    existing file kept as FILE~) and each group's own variables to ``group_vars/<group>.yml``
    beside it; without, only the text (the group variables then left out, said in a warning)."""
    import yaml

    from provision.files import write_atomic
    from provision.inventory.model import inventory_to_yaml

    imported = read_ansible_inventory(source)
    done = Conversion(inventory_to_yaml(imported.inventory), list(imported.warnings), [])
    if output is None:
        if imported.group_vars:
            done.warnings.append(
                f"the variables of group(s) {', '.join(imported.group_vars)} are not in this output: "
                "give -o FILE to write them to group_vars/<group>.yml beside it"
            )
        return done
    done.written.append(("inventory", output, write_atomic(output, done.text)))
    for group, variables in imported.group_vars.items():
        target = output.parent / "group_vars" / f"{group}.yml"
        target.parent.mkdir(exist_ok=True)
        text = yaml.safe_dump(variables, sort_keys=False, default_flow_style=False)
        done.written.append((f"group_vars of {group}", target, write_atomic(target, text)))
    return done
