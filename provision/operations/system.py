"""Packages (apt, dnf), commands with creates/unless, and systemd services."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provision.errors import ArgumentError
from provision.operations.base import (
    PACKAGE_NAME,
    SERVICE_NAME,
    UNKNOWN,
    Arg,
    Operation,
    OperationError,
    Run,
    ServiceState,
    StateKey,
    check_path,
    mask_secrets,
    quote,
)
from provision.operations.os_state import PackageIndex
from provision.operations.platform import OS, alternatives, for_node, per_family
from provision.templating.shell import command_display
from provision.text import printable, shown_value


def _check_names(names: Any) -> list[str]:
    names = [names] if isinstance(names, str) else list(names)
    for name in names:
        if not isinstance(name, str) or not PACKAGE_NAME.match(name):
            raise ArgumentError(f"package: {shown_value(name)} is not a package name")
    return names


def _names(args: dict, current: Mapping[StateKey, Any] | None = None) -> list[str]:
    """The packages of this node (its family's, see :mod:`provision.operations.platform`); with no
    facts, those of every family (what the facts are read for)."""
    if args["state"] not in ("present", "absent"):
        raise ArgumentError(f"package: state must be present or absent, not {shown_value(args['state'])}")
    if current is not None:
        return _check_names(for_node(args["name"], current, "package"))
    return list(dict.fromkeys(n for names in alternatives(args["name"], "package") for n in _check_names(names)))


def _package_requests(args: dict) -> list[StateKey]:
    names = _names(args)
    check_cache_valid_time(args)
    return (
        [StateKey("pkgmgr"), INDEX]
        + ([OS] if per_family(args["name"]) else [])
        + [StateKey("package", name) for name in names]
        + [StateKey("candidate", name) for name in names]
    )


INDEX = StateKey("pkgindex")
DEFAULT_CACHE_VALID_TIME = 86400  # seconds: an index older than a day is refreshed before an install
_INSTALL = {
    "apt": "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends",
    "dnf": "dnf install -y -q",
    "yum": "yum install -y -q",
}
_REFRESH = {"apt": "DEBIAN_FRONTEND=noninteractive apt-get update -q", "dnf": "dnf makecache -q", "yum": "yum makecache -q"}
_REMOVE = {"apt": "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q", "dnf": "dnf remove -y -q", "yum": "yum remove -y -q"}


def check_cache_valid_time(args: dict) -> int:
    """``cache_valid_time`` in seconds (default a day); bad input when negative."""
    value = args.get("cache_valid_time")
    value = DEFAULT_CACHE_VALID_TIME if value is None else value
    if value < 0:
        raise ArgumentError(f"package: cache_valid_time must be 0 or more seconds, not {value}")
    return value


def needs_refresh(args: dict, todo: list[str], current: Mapping[StateKey, Any]) -> str | None:
    """Why the package index must be refreshed before installing ``todo`` (None: it need not):
    ``update: true``, no index at all, an index older than ``cache_valid_time``, or (apt) a
    package the index has no candidate for. Never twice in a run on a host: once this run refreshed it,
    the candidates read before are stale and apt-get's own error says what is missing."""
    index = current.get(INDEX)
    if isinstance(index, PackageIndex) and index.refreshed:
        return None
    if args["update"]:
        return "update: true"
    if not isinstance(index, PackageIndex) or index.age is None:
        return "no package index"
    if index.age < 0 or index.age > check_cache_valid_time(args):
        return f"index older than {check_cache_valid_time(args)}s"
    # apt only: dnf and yum read expired metadata again by themselves when they install
    missing = [n for n in todo if current.get(StateKey("candidate", n)) is None] if index.manager == "apt" else []
    if missing:
        return f"no candidate for {', '.join(missing)}"
    return None


def plan_package(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Install the missing packages (or remove the present ones) with apt-get or dnf in one
    command; before an install, refresh the index when :func:`needs_refresh` says so (Ansible's
    ``update_cache`` + ``cache_valid_time``; dnf: ``makecache``)."""
    names = _names(args, current)
    manager = current.get(StateKey("pkgmgr"))
    present = args["state"] == "present"
    todo = [n for n in names if (current.get(StateKey("package", n)) is None) == present]
    if not todo:
        return []
    if manager not in _INSTALL:
        raise OperationError("package: neither apt-get nor dnf/yum found on this host")
    words = " ".join(quote(n) for n in todo)
    effects: list[tuple[StateKey, Any]] = [(StateKey("package", n), "installed" if present else None) for n in todo]
    if present:
        command = f"{_INSTALL[manager]} {words}"
        why = needs_refresh(args, todo, current)
        if why:
            command = f"{_REFRESH[manager]} && {command}"
            effects.append((INDEX, PackageIndex(manager, 0, refreshed=True)))
        effects += [(StateKey("candidate", n), "installed") for n in todo]
        describe = f"install {', '.join(todo)}" + (f" (index refreshed: {why})" if why else "")
    else:
        command = f"{_REMOVE[manager]} {words}"
        effects += [(StateKey("candidate", n), UNKNOWN) for n in todo]
        describe = f"remove {', '.join(todo)}"
    return [Run(command, describe, tuple(effects))]


def _command_requests(args: dict) -> list[StateKey]:
    keys = []
    if args["creates"]:  # only whether the name is there: a link counts (never followed), as Ansible's glob does
        keys.append(StateKey("exists", check_path(args["creates"])))
    if args["unless"]:
        keys.append(StateKey("command", args["unless"]))
    return keys


def plan_command(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Run ``cmd`` unless ``creates`` exists or ``unless`` exits 0 (both read at the task's turn,
    ``unless`` as the task's user)."""
    if args["creates"] and current.get(StateKey("exists", check_path(args["creates"]))) is not None:
        return []
    if args["unless"] and current.get(StateKey("command", args["unless"])) == 0:
        return []
    # Shown with its values in place (display only; what runs passes them as variables), secrets masked.
    return [Run(args["cmd"], "run " + printable(mask_secrets(command_display(args["cmd"])), 60))]  # it may alter anything


def _service_names(args: dict) -> list[str]:
    names = alternatives(args["name"], "service")
    for name in names:
        if not isinstance(name, str) or not SERVICE_NAME.match(name):
            raise ArgumentError(f"service: {shown_value(name)} is not a unit name")
    if args["state"] not in ("started", "stopped", "restarted", "reloaded"):
        raise ArgumentError(f"service: state must be started, stopped, restarted or reloaded, not {shown_value(args['state'])}")
    return names


def _service_requests(args: dict) -> list[StateKey]:
    names = _service_names(args)
    return [StateKey("systemd"), *(StateKey("service", n) for n in names)] + ([OS] if per_family(args["name"]) else [])


def plan_service(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Start/stop/restart and enable/disable a unit with systemctl; a host without systemd is a
    clear error (containers and some HPC images run none)."""
    _service_names(args)
    name = for_node(args["name"], current, "service")
    if not current.get(StateKey("systemd")):
        raise OperationError(
            f"service {name}: systemd is not running on this host (no /run/systemd/system); start the service by other means"
        )
    state: ServiceState = current.get(StateKey("service", name)) or ServiceState("unknown", "unknown")
    commands, active, enabled = [], state.active, state.enabled
    if args["daemon_reload"] and state.need_reload:  # systemd reads the changed unit file first
        commands.append("systemctl daemon-reload")
    wanted = args["state"]
    if wanted == "started" and state.active != "active":
        commands.append(f"systemctl start {quote(name)}")
        active = "active"
    elif wanted == "stopped" and state.active == "active":
        commands.append(f"systemctl stop {quote(name)}")
        active = "inactive"
    elif wanted in ("restarted", "reloaded"):
        commands.append(f"systemctl {wanted[:-2]} {quote(name)}")
        active = "active"
    if args["enabled"] is not None and (state.enabled == "enabled") != args["enabled"]:
        commands.append(f"systemctl {'enable' if args['enabled'] else 'disable'} {quote(name)}")
        enabled = "enabled" if args["enabled"] else "disabled"
    if not commands:
        return []
    return [
        Run(
            " && ".join(commands),
            f"service {name}: {', '.join(c.split()[1] for c in commands)}",
            ((StateKey("service", name), ServiceState(active, enabled)),),
        )
    ]


OPERATIONS = {
    "package": Operation(
        "package",
        {
            "name": Arg((str, list, dict), True, help="packages, or per OS family: {debian: [...], rhel: [...]}"),
            "state": Arg((str,), default="present", help="present or absent"),
            "update": Arg((bool,), default=False, help="refresh the package index first, however fresh"),
            "cache_valid_time": Arg((int,), help="seconds an index stays fresh (default a day)"),
        },
        _package_requests,
        plan_package,
        doc="packages installed with apt-get or dnf",
    ),
    "command": Operation(
        "command",
        {
            "cmd": Arg((str,), True, help="shell command; each {{ }} in it is one quoted word"),
            "creates": Arg((str,), help="skipped when this path exists, a link too (read at the task's turn)"),
            "unless": Arg((str,), help="skipped when this command succeeds (run as the task's user, at its turn)"),
        },
        _command_requests,
        plan_command,
        doc="a shell command, skipped by creates/unless",
        sticky="own",  # a creates: in /tmp: the task's user's own name, or none
    ),
    "service": Operation(
        "service",
        {
            "name": Arg((str, dict), True, help="a unit, or one per OS family"),
            "state": Arg((str,), default="started", help="started, stopped, restarted or reloaded"),
            "enabled": Arg((bool,), help="enabled at boot (unset: left as it is)"),
            "daemon_reload": Arg(
                (bool,), default=False, help="systemctl daemon-reload first when systemd holds an older copy of the unit file"
            ),
        },
        _service_requests,
        plan_service,
        doc="a systemd service",
    ),
}
