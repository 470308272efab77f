"""Variables for a host, lowest precedence first, as Ansible layers them: the inventory's
``vars``, ``group_vars/all``, ``group_vars/<group>`` (groups in inventory order, then racks),
the host's own ``vars``, ``host_vars/<host>``, the play's ``vars``, then ``-e key=value`` /
``-e @file.yml``. ``group_vars/`` and ``host_vars/`` sit beside the inventory; each entry is a
file (``NAME``, ``NAME.yml``, ``NAME.yaml`` or ``NAME.json``) or a folder ``NAME/`` of such files
(read in sorted order, later files winning). A file there that names no group or host is a
warning, never silently ignored. Every consumer (tasks, the pair check, the uid check, the role
summary) reads variables through :class:`Variables`: one source of truth."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from provision.errors import ProvisionError
from provision.inventory.model import VAR_NAME, Host, Inventory
from provision.text import shown_value
from provision.yaml_lines import load_yaml_with_lines


class VariableError(ProvisionError):
    """A bad ``-e`` value, variables file or variable value."""


def _load_mapping(path: Path) -> dict:
    """The variables of one file, with each name's line kept (``key_lines``) for messages."""
    try:
        data = load_yaml_with_lines(path)
    except ProvisionError as error:
        raise VariableError(str(error)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise VariableError(f"{path}:1: expected a mapping of variables")
    for name in data:
        if not isinstance(name, str) or not VAR_NAME.match(name):
            raise VariableError(f"{path}:{data.key_lines.get(name)}: variable name {shown_value(name)} is not an identifier")
    return data


def parse_extra_vars(items: list[str]) -> dict:
    """``-e key=value`` (a string) and ``-e @file.yml`` (a YAML mapping), later ones winning."""
    result: dict[str, Any] = {}
    for item in items or []:
        if item.startswith("@"):
            path = Path(item[1:]).expanduser()
            if not path.is_file():
                raise VariableError(f"-e {item}: no such file")
            result.update(_load_mapping(path))
            continue
        name, sep, value = item.partition("=")
        if not sep or not VAR_NAME.match(name):
            raise VariableError(f"-e {shown_value(item)}: expected NAME=VALUE or @FILE.yml")
        result[name] = value
    return result


VARS_EXTENSIONS = ("", ".yml", ".yaml", ".json")


def _is_vars_file(path: Path) -> bool:
    return path.is_file() and not path.name.startswith(".") and path.suffix in VARS_EXTENSIONS and not path.name.endswith("~")


def load_vars_folder(folder: Path, names: list[str], kind: str, warnings: list[str]) -> dict[str, tuple[tuple[Path, dict], ...]]:
    """``group_vars/`` or ``host_vars/``: NAME -> its files' variables, in the order they apply.
    An entry that names no group/host (``kind``) is reported in ``warnings``."""
    found: dict[str, tuple[tuple[Path, dict], ...]] = {}
    if not folder.is_dir():
        return found
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.name.endswith("~"):
            continue
        # group_vars/gpu.yml, group_vars/gpu/ and host_vars/w1.example.com (no extension) alike
        known_suffix = entry.is_file() and entry.suffix in VARS_EXTENSIONS[1:]
        name = entry.name[: -len(entry.suffix)] if known_suffix else entry.name
        if not (entry.is_dir() or entry.is_file()):
            continue
        if name not in names:
            warnings.append(
                f"{entry}: no {kind} {shown_value(name)} in the inventory, so these variables apply to no host "
                f"({kind}s: {', '.join(names[:12]) + (' ...' if len(names) > 12 else '')})"
            )
            continue
        files = sorted(p for p in entry.rglob("*") if _is_vars_file(p)) if entry.is_dir() else [entry]
        found[name] = found.get(name, ()) + tuple((path, _load_mapping(path)) for path in files)
    return found


class Variables:
    """Variable layers of one inventory, merged per host on demand; ``warnings`` says what was
    found but applies to no host."""

    def __init__(self, inventory: Inventory, extra: dict | None = None, facts_dir: Path | None = None):
        self.inventory = inventory
        self.extra = dict(extra or {})
        self.facts_dir = facts_dir  # where `provision probe` keeps the hardware facts (the Slurm role reads them)
        self.warnings: list[str] = []
        base = inventory.path.parent if inventory.path else None
        self.groups: dict[str, tuple[str, ...]] = dict(inventory.groups)
        for rack in inventory.racks:  # racks are groups for group_vars, as for host patterns
            self.groups.setdefault(rack.name, rack.hosts)
        self.group_files: dict[str, tuple[tuple[Path, dict], ...]] = {}
        self.host_files: dict[str, tuple[tuple[Path, dict], ...]] = {}
        if base is not None:
            self.group_files = load_vars_folder(base / "group_vars", ["all", *self.groups], "group", self.warnings)
            self.host_files = load_vars_folder(base / "host_vars", list(inventory.hosts), "host", self.warnings)

    def layers(self, host: Host, play_vars: dict | None = None) -> list[tuple[str, dict]]:
        """(where, variables) for ``host``, lowest precedence first."""
        where = str(self.inventory.path) if self.inventory.path else "inventory"
        layers: list[tuple[str, dict]] = [(f"{where} vars:", self.inventory.vars)]
        for group in ["all", *(g for g, members in self.groups.items() if host.name in members)]:
            layers.extend((str(path), data) for path, data in self.group_files.get(group, ()))
        layers.append((f"{where} hosts: {host.name}: vars:", host.vars))
        layers.extend((str(path), data) for path, data in self.host_files.get(host.name, ()))
        layers.append(("the play's vars:", play_vars or {}))
        layers.append(("-e", self.extra))
        return layers

    def origins(self, host: Host) -> list[tuple[str, dict, dict[str, int]]]:
        """(file, variables, name -> line) of each layer the user wrote for ``host``, lowest first."""
        inventory = str(self.inventory.path) if self.inventory.path else "inventory"
        found = [(inventory, self.inventory.vars, self.inventory.var_lines)]
        for group in ["all", *(g for g, members in self.groups.items() if host.name in members)]:
            found.extend((str(p), data, getattr(data, "key_lines", {})) for p, data in self.group_files.get(group, ()))
        found.append((inventory, host.vars, host.var_lines))
        found.extend((str(p), data, getattr(data, "key_lines", {})) for p, data in self.host_files.get(host.name, ()))
        return found

    def origin(self, host: Host, name: str) -> str | None:
        """``file:line`` where the value of ``name`` that ``host`` sees was written (``-e`` when
        given on the command line), or None when no file of the user sets it."""
        if name in self.extra:
            return f"-e {name}"
        for where, data, lines in reversed(self.origins(host)):
            if name in data:
                return f"{where}:{lines[name]}" if lines.get(name) else where
        return None

    def inventory_vars(self, host: Host) -> dict:
        """What the inventory gives ``host`` (vars:, group_vars/, its own vars, host_vars/ merged in
        that order), as ``ansible-inventory`` shows a host's variables: no play's, no ``-e``."""
        merged: dict[str, Any] = {}
        for _where, data in self.layers(host)[:-2]:
            merged.update(data)
        return merged

    def source(self, host: Host, name: str) -> str | None:
        """Where ``name`` of ``host`` comes from (the layer that wins), or None when unset."""
        return next((where for where, data in reversed(self.layers(host)) if name in data), None)

    def for_host(self, host: Host, play_vars: dict | None = None) -> dict:
        """All variables of ``host`` (plus ``inventory_hostname`` and ``groups``) for one play."""
        merged: dict[str, Any] = {}
        for _where, data in self.layers(host, play_vars):
            merged.update(data)
        merged["inventory_hostname"] = host.name
        merged["inventory_dir"] = str(self.inventory.path.parent) if self.inventory.path else "."  # controller files of roles
        merged["groups"] = {"all": list(self.inventory.hosts), **{g: list(m) for g, m in self.inventory.groups.items()}}
        merged["provision_facts_dir"] = str(self.facts_dir) if self.facts_dir is not None else None
        return merged


def cluster_users_by_host(variables: Variables, hosts: list[Host]) -> dict[str, list[dict]]:
    """Each host's ``cluster_users`` (from every layer, as its tasks see them), checked: each list
    as :func:`check_cluster_users`, and across hosts one uid/gid per name and one name per uid
    (the point of cluster users). Errors name the host and the file the list comes from."""
    per_host: dict[str, list[dict]] = {}
    first: dict[str, tuple[str, Any, Any]] = {}  # name -> (host, uid, gid)
    owner: dict[int, tuple[str, str]] = {}  # uid -> (name, host)
    for host in hosts:
        where = variables.source(host, "cluster_users")
        try:
            users = check_cluster_users(variables.for_host(host).get("cluster_users"))
        except VariableError as error:
            raise VariableError(f"{where} (host {host.name}): {error}") from None
        check_own_keys(users, variables.origin(host, "cluster_users"), variables.inventory.path)
        for user in users:
            name, uid, gid = user["name"], user["uid"], user.get("gid", user["uid"])
            seen = first.setdefault(name, (host.name, uid, gid))
            if seen[1:] != (uid, gid):
                raise VariableError(
                    f"{where} (host {host.name}): cluster user {name} has uid/gid {uid}/{gid} here "
                    f"but {seen[1]}/{seen[2]} on {seen[0]}: a cluster user needs the same ids on every node"
                )
            other = owner.setdefault(uid, (name, host.name))
            if other[0] != name:
                raise VariableError(f"{where} (host {host.name}): uid {uid} of {name} is the uid of {other[0]} on {other[1]}")
        per_host[host.name] = users
    return per_host


def check_cluster_users(users: Any) -> list[dict]:
    """Validate ``cluster_users`` (a list of {name, uid, gid?, shell?, groups?, state?,
    remove_home?}): names safe, ids numbers, state present/absent, no name or uid twice.
    Raises :class:`VariableError` naming the entry."""
    from provision.inventory.model import USER_NAME

    if users is None:
        return []
    if not isinstance(users, list):
        raise VariableError("cluster_users must be a list of {name, uid, gid?, shell?, groups?}")
    seen_names: dict[str, int] = {}
    seen_uids: dict[int, str] = {}
    for index, user in enumerate(users):
        where = f"cluster_users[{index}]"
        if not isinstance(user, dict) or "name" not in user or "uid" not in user:
            raise VariableError(f"{where}: needs name and uid")
        name, uid = user["name"], user["uid"]
        if not isinstance(name, str) or not USER_NAME.match(name):
            raise VariableError(f"{where}: user name {shown_value(name)} may only hold letters, digits, '.', '_', '-'")
        for key in ("uid", "gid"):
            value = user.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31):
                raise VariableError(f"{where} ({name}): {key} {shown_value(value)} is not a positive number")
        if user.get("state", "present") not in ("present", "absent"):
            raise VariableError(f"{where} ({name}): state {shown_value(user['state'])} is not present or absent")
        if not isinstance(user.get("remove_home", False), bool):
            raise VariableError(f"{where} ({name}): remove_home must be true or false")
        if name in seen_names:
            raise VariableError(f"{where}: user {name} is listed twice")
        if uid in seen_uids:
            raise VariableError(f"{where}: uid {uid} of {name} is already the uid of {seen_uids[uid]}")
        seen_names[name], seen_uids[uid] = index, name
    return users


def check_own_keys(users: list[dict], origin: str | None, inventory: Path | None) -> None:
    """Each cluster user's own keys (``ssh_keys``, ``ssh_keys_file`` relative to the inventory's
    folder) checked as sshd reads them, before any command runs on a host: an error names the line that
    holds the key (``hosts.yml:14: cluster_users[1] (alice): ssh_keys[0]: not a public key line
    (...)``) or the keys file's own ``file:line``."""
    from provision.errors import ArgumentError
    from provision.operations.authorized_keys import own_keys

    source = origin.rsplit(":", 1)[0] if origin and origin.rsplit(":", 1)[-1].isdigit() else origin
    base = str(inventory.parent) if inventory is not None else None
    for index, user in enumerate(users):
        keys, keys_file = user.get("ssh_keys"), user.get("ssh_keys_file")
        if keys_file is not None and (not isinstance(keys_file, str) or not keys_file):
            raise VariableError(f"{origin}: cluster_users[{index}] ({user['name']}): ssh_keys_file must be a file name")
        try:
            own_keys(keys, keys_file, base)
        except ArgumentError as error:
            text, line = str(error), None
            inline = re.match(r"ssh_keys(?:\[(\d+)\])?[: ]", text)
            if inline:  # a key written in the inventory: its own line; a keys file's error names file:line itself
                lines = getattr(keys, "item_lines", None)
                line = lines[int(inline.group(1))] if inline.group(1) and lines else None
                line = line or getattr(user, "key_lines", {}).get("ssh_keys")
            at = f"{source}:{line}" if source and line else (origin or "-e")
            raise VariableError(f"{at}: cluster_users[{index}] ({user['name']}): {text}") from None


def inventory_with_vars(path: Path | None) -> tuple[Inventory, Variables]:
    """``provision inventory show``: the inventory at ``path`` (None: the default one) and its
    variables as setup-cluster reads them (group_vars/ and host_vars/ beside it); ProvisionError
    when there is no inventory at all, saying how to write one."""
    from provision.inventory.model import DEFAULT_INVENTORY, open_inventory

    inventory = open_inventory(path)
    if inventory.path is None:
        raise ProvisionError(
            f"no inventory: {DEFAULT_INVENTORY} does not exist here and no -i FILE was given; "
            "write one (`mkdir -p inventory && provision inventory example > inventory/hosts.yml`, then edit it) "
            "or convert Ansible's (`provision inventory import /etc/ansible/hosts -o inventory/hosts.yml`)"
        )
    return inventory, Variables(inventory)
