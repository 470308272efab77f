"""The inventory: hosts (how to reach them), groups, variables and the rack layout.

Format (``inventory/hosts.yml``)::

    defaults:            # applied to every host unless it says otherwise
      user: mpi
      key: ~/.ssh/id_ed25519
    hosts:
      node01: {address: 10.0.0.11}
      node02: {address: 10.0.0.12, port: 2222}
    groups:
      gpu: [node01, node02]
    racks:               # order matters: rank files number hosts rack by rack
      - {name: rack1, hosts: [node01, node02]}
    vars:
      dataset_dir: /data

Every value that could reach a shell or an SSH option is checked here, once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision.errors import ArgumentError, InventoryError
from provision.text import shown_value
from provision.yaml_lines import LineDict, load_yaml_with_lines

DEFAULT_INVENTORY = Path("inventory/hosts.yml")
LOCALHOST = "localhost"

HOST_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})\Z")
ADDRESS = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})|\[?[0-9A-Fa-f:]+\]?)\Z")
USER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]{0,31}\Z")
GROUP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*\Z")
VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_HOST_KEYS = {"address", "user", "port", "key", "vars"}


@dataclass(frozen=True)
class Host:
    """One host and how to reach it. ``address`` defaults to the name (ssh config applies)."""

    name: str
    address: str | None = None
    user: str | None = None
    port: int | None = None
    key: str | None = None
    vars: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    var_lines: dict[str, int] = field(default_factory=dict, compare=False, hash=False, repr=False)  # name -> file line

    @property
    def is_local(self) -> bool:
        """``localhost`` runs commands locally, with no SSH."""
        return self.name == LOCALHOST and self.address in (None, LOCALHOST)


@dataclass(frozen=True)
class Rack:
    """A rack: its hosts in order."""

    name: str
    hosts: tuple[str, ...]


@dataclass
class Inventory:
    """Hosts, groups, racks, variables; ``path`` is None for an ad-hoc inventory."""

    hosts: dict[str, Host] = field(default_factory=dict)
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    racks: tuple[Rack, ...] = ()
    vars: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    var_lines: dict[str, int] = field(default_factory=dict, repr=False)  # name -> its line in ``path``

    def resolve(self, patterns: list[str]) -> list[Host]:
        """Host patterns (Ansible's: names, groups, racks, ``all``, ``gpu:!w3``, ``w[1:3]``,
        ``w*``; see :mod:`provision.inventory.patterns`) -> hosts, in order, without repeats.

        A plain name the inventory does not know is taken as an ad-hoc host (reached by name,
        with ``~/.ssh/config`` applying) once it passes the same checks as an inventory name.
        """
        from provision.inventory.patterns import select_hosts

        return select_hosts(self, patterns, unknown=self.adhoc_host)

    def adhoc_host(self, name: str) -> Host:
        """A host the inventory does not list, reached by ``name`` (checked like an inventory name)."""
        check_host_name(name, "command line")
        return Host(name)

    def rack_order(self) -> list[str]:
        """All rack hosts, rack 1 first, as rank_gen expects its host list."""
        return [name for rack in self.racks for name in rack.hosts]


def check_user(name: Any, what: str = "user") -> str:
    """``name`` if it is a safe user or group name (:data:`USER_NAME`), else :class:`ArgumentError`
    naming ``what`` (an operation's argument, ``--user``): the one rule for a user name, wherever
    it comes from (the inventory, a playbook, the command line).

    >>> check_user("alice")
    'alice'
    """
    if not isinstance(name, str) or not USER_NAME.match(name):
        raise ArgumentError(
            f"{what} name {shown_value(name)} may only hold letters, digits, '.', '_', '-' (and not start with '-')"
        )
    return name


def check_host_name(name: str, where: str) -> str:
    """Return ``name`` if it is a safe host name, else raise naming ``where``."""
    if not isinstance(name, str) or not HOST_NAME.match(name):
        raise InventoryError(where, None, f"host name {shown_value(name)} may only hold letters, digits, '.', '_', '-'")
    return name


def _fail(path: Path, line: int | None, message: str) -> InventoryError:
    return InventoryError(str(path), line, message)


def _host_fields(path: Path, name: str, raw: Any, line: int, defaults: dict[str, Any]) -> Host:
    if raw is None:
        raw = LineDict()
        raw.key_lines = {}
    if not isinstance(raw, dict):
        raise _fail(path, line, f"host {name}: expected a mapping of address/user/port/key/vars")
    key_lines = getattr(raw, "key_lines", {})
    unknown = set(raw) - _HOST_KEYS
    if unknown:
        bad = sorted(map(str, unknown))[0]
        raise _fail(
            path,
            key_lines.get(bad, line),
            f"host {name}: unknown field {shown_value(bad)} (allowed: {', '.join(sorted(_HOST_KEYS))})",
        )
    merged = {**defaults, **raw}

    def where(key: str) -> int:
        return key_lines.get(key, line)

    address = merged.get("address")
    if address is not None and (not isinstance(address, str) or not ADDRESS.match(address)):
        raise _fail(path, where("address"), f"host {name}: address {shown_value(address)} is not a host name or IP address")
    user = merged.get("user")
    if user is not None and (not isinstance(user, str) or not USER_NAME.match(user)):
        raise _fail(path, where("user"), f"host {name}: user {shown_value(user)} is not a valid user name")
    port = merged.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535):
        raise _fail(path, where("port"), f"host {name}: port {shown_value(port)} is not a number 1-65535")
    key = merged.get("key")
    if key is not None and (not isinstance(key, str) or any(ord(ch) < 32 for ch in key)):
        raise _fail(path, where("key"), f"host {name}: key {shown_value(key)} is not a file path")
    host_vars = raw.get("vars") or {}
    if not isinstance(host_vars, dict):
        raise _fail(path, where("vars"), f"host {name}: vars must be a mapping")
    lines = dict(getattr(host_vars, "key_lines", {}))
    return Host(name, address, user, port, key, dict(host_vars), lines)  # key: "~" expanded at connect time


# Blanks within the line only: a leading \s* would cross line ends and rescan every blank line below
# from each line start (quadratic in a file of empty lines).
_INI_SECTION = re.compile(r"^[^\S\n]*\[[A-Za-z0-9_.:-]+\][^\S\n]*$", re.MULTILINE)


def _ansible_hint(path: Path, kind: str | None = None) -> InventoryError | None:
    """For an Ansible inventory given where provision's is expected: the error saying how to convert it."""
    if kind is None:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return None
        if not _INI_SECTION.search(text) and not re.search(r"^\S+\s+ansible_\w+=", text, re.MULTILINE):
            return None
        kind = "an Ansible INI inventory"
    return _fail(
        path,
        None,
        f"this is {kind}, not provision's YAML format: convert it once with "
        f"`provision inventory import {path} -o inventory/hosts.yml`, then use -i inventory/hosts.yml",
    )


def load_inventory(path: Path) -> Inventory:
    """Read and check an inventory file; every error names the file and line."""
    path = Path(path)
    try:
        data = load_yaml_with_lines(path)
    except InventoryError as error:
        raise _ansible_hint(path) or error from None
    if data is None:
        return Inventory(path=path)
    if not isinstance(data, dict):
        raise _ansible_hint(path) or _fail(
            path, getattr(data, "line", 1), "expected a mapping with hosts:, groups:, racks:, vars:"
        )
    allowed = {"defaults", "hosts", "groups", "racks", "vars"}
    for key in data:
        if key not in allowed and ("all" in data or "ungrouped" in data):
            raise _ansible_hint(path, "an Ansible YAML inventory") or _fail(path, None, "not provision's format")
        if key not in allowed:
            raise _fail(
                path, data.key_lines.get(key), f"unknown section {shown_value(key)} (allowed: {', '.join(sorted(allowed))})"
            )
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict) or set(defaults) - (_HOST_KEYS - {"vars"}):
        raise _fail(path, data.key_lines.get("defaults"), "defaults: may hold address/user/port/key only")
    hosts_raw = data.get("hosts") or {}
    if not isinstance(hosts_raw, dict):
        raise _fail(path, data.key_lines.get("hosts"), "hosts: expected a mapping of host name -> fields")
    hosts: dict[str, Host] = {}
    for name, raw in hosts_raw.items():
        line = hosts_raw.key_lines.get(name)
        if not isinstance(name, str) or not HOST_NAME.match(name):
            raise _fail(path, line, f"host name {shown_value(name)} may only hold letters, digits, '.', '_', '-'")
        hosts[name] = _host_fields(path, name, raw, line, dict(defaults))

    def host_list(value: Any, line: int | None, what: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise _fail(path, line, f"{what}: expected a list of host names")
        item_lines = getattr(value, "item_lines", [line] * len(value))
        for item, item_line in zip(value, item_lines, strict=False):
            if item not in hosts:
                raise _fail(path, item_line, f"{what}: {shown_value(item)} is not a host in hosts:")
        if len(set(value)) != len(value):
            raise _fail(path, line, f"{what}: a host is listed twice")
        return tuple(value)

    groups_raw = data.get("groups") or {}
    if not isinstance(groups_raw, dict):
        raise _fail(path, data.key_lines.get("groups"), "groups: expected a mapping of group -> host list")
    groups = {}
    for group, members in groups_raw.items():
        line = groups_raw.key_lines.get(group)
        if not isinstance(group, str) or not GROUP_NAME.match(group) or group == "all" or group in hosts:
            raise _fail(path, line, f"group name {shown_value(group)} is invalid or clashes with 'all' or a host")
        groups[group] = host_list(members, line, f"group {group}")

    racks_raw = data.get("racks") or []
    if not isinstance(racks_raw, list):
        raise _fail(path, data.key_lines.get("racks"), "racks: expected a list of {name, hosts}")
    racks = []
    in_rack: dict[str, str] = {}
    for index, rack in enumerate(racks_raw):
        line = racks_raw.item_lines[index]
        if not isinstance(rack, dict) or set(rack) != {"name", "hosts"}:
            raise _fail(path, line, "a rack is {name: ..., hosts: [...]}")
        rack_name = str(rack["name"])
        members = host_list(rack["hosts"], rack.key_lines.get("hosts", line), f"rack {rack_name}")
        for member in members:
            if member in in_rack:
                raise _fail(path, line, f"host {member} is in racks {in_rack[member]} and {rack_name}")
            in_rack[member] = rack_name
        racks.append(Rack(rack_name, members))

    variables = data.get("vars") or {}
    if not isinstance(variables, dict):
        raise _fail(path, data.key_lines.get("vars"), "vars: expected a mapping")
    for name in variables:
        if not isinstance(name, str) or not VAR_NAME.match(name):
            raise _fail(path, variables.key_lines.get(name), f"variable name {shown_value(name)} is not an identifier")
    return Inventory(hosts, groups, tuple(racks), dict(variables), path, dict(getattr(variables, "key_lines", {})))


def open_inventory(path: Path | None) -> Inventory:
    """The inventory at ``path``; with None, ``inventory/hosts.yml`` if present, else an empty one."""
    if path is not None:
        return load_inventory(path)
    if DEFAULT_INVENTORY.exists():
        return load_inventory(DEFAULT_INVENTORY)
    return Inventory()


_ANSIBLE_CONNECTION_VARS = (
    ("address", "ansible_host"),
    ("user", "ansible_user"),
    ("port", "ansible_port"),
    ("key", "ansible_ssh_private_key_file"),
)


def ansible_list(inventory: Inventory, merged_vars: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The inventory as ``ansible-inventory --list`` prints it: each group with its ``hosts``,
    ``all`` with its ``children``, and ``_meta.hostvars`` (each host's variables as merged for it,
    ``merged_vars``: with group_vars/ and host_vars/, else vars: under its own; and how each host
    is reached as ansible_host/user/port/ssh_private_key_file). Racks are groups."""
    groups: dict[str, tuple[str, ...]] = dict(inventory.groups)
    for rack in inventory.racks:
        groups.setdefault(rack.name, rack.hosts)
    grouped = {name for members in groups.values() for name in members}
    ungrouped = [name for name in inventory.hosts if name not in grouped]
    hostvars: dict[str, dict[str, Any]] = {}
    for host in inventory.hosts.values():
        merged = dict(merged_vars[host.name]) if merged_vars is not None else {**inventory.vars, **host.vars}
        for field_name, ansible_name in _ANSIBLE_CONNECTION_VARS:
            value = getattr(host, field_name)
            if value is not None:
                merged[ansible_name] = value
        hostvars[host.name] = merged
    document: dict[str, Any] = {"_meta": {"hostvars": hostvars}, "all": {"children": ["ungrouped", *groups]}}
    document.update({name: {"hosts": list(members)} for name, members in groups.items()})
    document["ungrouped"] = {"hosts": ungrouped} if ungrouped else {}
    return document


def inventory_to_yaml(inventory: Inventory) -> str:
    """Serialise an inventory in the format :func:`load_inventory` reads."""
    import yaml

    hosts = {}
    for host in inventory.hosts.values():
        fields = {
            k: v
            for k, v in (("address", host.address), ("user", host.user), ("port", host.port), ("key", host.key))
            if v is not None
        }
        if host.vars:
            fields["vars"] = host.vars
        hosts[host.name] = fields or None
    document: dict[str, Any] = {"hosts": hosts}
    if inventory.groups:
        document["groups"] = {name: list(members) for name, members in inventory.groups.items()}
    if inventory.racks:
        document["racks"] = [{"name": rack.name, "hosts": list(rack.hosts)} for rack in inventory.racks]
    if inventory.vars:
        document["vars"] = inventory.vars
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml when present: same text, ~3x faster
    return yaml.dump(document, Dumper=dumper, sort_keys=False, default_flow_style=False)
