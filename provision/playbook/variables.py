"""Variables for a host, lowest precedence first: inventory ``vars``, ``group_vars/<group>.yml``
(next to the inventory, groups in inventory order), the host's own ``vars`` and
``host_vars/<host>.yml``, the play's ``vars``, then ``-e key=value`` / ``-e @file.yml``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provision.errors import ProvisionError
from provision.inventory import VAR_NAME, Host, Inventory
from provision.yaml_lines import load_yaml_with_lines


class VariableError(ProvisionError):
    """A bad ``-e`` value, variables file or variable value."""


def _load_mapping(path: Path) -> dict:
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
            raise VariableError(f"{path}:{data.key_lines.get(name)}: variable name {name!r} is not an identifier")
    return dict(data)


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
            raise VariableError(f"-e {item!r}: expected NAME=VALUE or @FILE.yml")
        result[name] = value
    return result


class Variables:
    """Variable layers of one inventory, merged per host on demand."""

    def __init__(self, inventory: Inventory, extra: dict | None = None):
        self.inventory = inventory
        self.extra = dict(extra or {})
        base = inventory.path.parent if inventory.path else None
        self.group_vars: dict[str, dict] = {}
        self.host_files: dict[str, dict] = {}
        if base is not None:
            for group in inventory.groups:
                path = base / "group_vars" / f"{group}.yml"
                if path.is_file():
                    self.group_vars[group] = _load_mapping(path)
            for name in inventory.hosts:
                path = base / "host_vars" / f"{name}.yml"
                if path.is_file():
                    self.host_files[name] = _load_mapping(path)

    def for_host(self, host: Host, play_vars: dict | None = None) -> dict:
        """All variables of ``host`` (plus ``inventory_hostname`` and ``groups``) for one play."""
        merged: dict[str, Any] = dict(self.inventory.vars)
        for group, members in self.inventory.groups.items():
            if host.name in members:
                merged.update(self.group_vars.get(group, {}))
        merged.update(host.vars)
        merged.update(self.host_files.get(host.name, {}))
        merged.update(play_vars or {})
        merged.update(self.extra)
        merged["inventory_hostname"] = host.name
        merged["inventory_dir"] = str(self.inventory.path.parent) if self.inventory.path else "."  # controller files of roles
        merged["groups"] = {"all": list(self.inventory.hosts), **{g: list(m) for g, m in self.inventory.groups.items()}}
        return merged


def check_cluster_users(users: Any) -> list[dict]:
    """Validate ``cluster_users`` (a list of {name, uid, gid?, shell?, groups?, state?,
    remove_home?}): names safe, ids numbers, state present/absent, no name or uid twice.
    Raises :class:`VariableError` naming the entry."""
    from provision.operations.base import USER_NAME

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
            raise VariableError(f"{where}: user name {name!r} may only hold letters, digits, '.', '_', '-'")
        for key in ("uid", "gid"):
            value = user.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31):
                raise VariableError(f"{where} ({name}): {key} {value!r} is not a positive number")
        if user.get("state", "present") not in ("present", "absent"):
            raise VariableError(f"{where} ({name}): state {user['state']!r} is not present or absent")
        if not isinstance(user.get("remove_home", False), bool):
            raise VariableError(f"{where} ({name}): remove_home must be true or false")
        if name in seen_names:
            raise VariableError(f"{where}: user {name} is listed twice")
        if uid in seen_uids:
            raise VariableError(f"{where}: uid {uid} of {name} is already the uid of {seen_uids[uid]}")
        seen_names[name], seen_uids[uid] = index, name
    return users
