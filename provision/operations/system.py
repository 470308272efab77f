"""Packages (apt, dnf), commands with creates/unless, and systemd services."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provision.operations.base import (
    PACKAGE_NAME,
    SERVICE_NAME,
    Arg,
    ArgumentError,
    FactKey,
    Operation,
    OperationError,
    Run,
    ServiceState,
    check_path,
    mask_secrets,
    printable,
    quote,
)
from provision.templating import command_display


def _names(args: dict) -> list[str]:
    names = args["name"]
    names = [names] if isinstance(names, str) else list(names)
    for name in names:
        if not isinstance(name, str) or not PACKAGE_NAME.match(name):
            raise ArgumentError(f"package: {name!r} is not a package name")
    if args["state"] not in ("present", "absent"):
        raise ArgumentError(f"package: state must be present or absent, not {args['state']!r}")
    return names


def _package_requests(args: dict) -> list[FactKey]:
    return [FactKey("pkgmgr")] + [FactKey("package", name) for name in _names(args)]


_INSTALL = {
    "apt": "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends",
    "dnf": "dnf install -y -q",
    "yum": "yum install -y -q",
}
_REMOVE = {"apt": "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q", "dnf": "dnf remove -y -q", "yum": "yum remove -y -q"}


def plan_package(args: dict, facts: Mapping[FactKey, Any]) -> list:
    """Install the missing packages (or remove the present ones) with apt-get or dnf in one command."""
    names = _names(args)
    manager = facts.get(FactKey("pkgmgr"))
    present = args["state"] == "present"
    todo = [n for n in names if (facts.get(FactKey("package", n)) is None) == present]
    if not todo:
        return []
    if manager not in _INSTALL:
        raise OperationError("package: neither apt-get nor dnf/yum found on this host")
    words = " ".join(quote(n) for n in todo)
    if present:
        command = f"{_INSTALL[manager]} {words}"
        if manager == "apt" and args["update"]:
            command = "DEBIAN_FRONTEND=noninteractive apt-get update -q && " + command
    else:
        command = f"{_REMOVE[manager]} {words}"
    effects = tuple((FactKey("package", n), "installed" if present else None) for n in todo)
    return [Run(command, f"{'install' if present else 'remove'} {', '.join(todo)}", effects)]


def _command_requests(args: dict) -> list[FactKey]:
    keys = []
    if args["creates"]:
        keys.append(FactKey("file", check_path(args["creates"])))
    if args["unless"]:
        keys.append(FactKey("command", args["unless"]))
    return keys


def plan_command(args: dict, facts: Mapping[FactKey, Any]) -> list:
    """Run ``cmd`` unless ``creates`` exists or ``unless`` exits 0 (both read at the task's turn,
    ``unless`` as the task's user)."""
    if args["creates"] and facts.get(FactKey("file", check_path(args["creates"]))) is not None:
        return []
    if args["unless"] and facts.get(FactKey("command", args["unless"])) == 0:
        return []
    # Shown with its values in place (display only; what runs passes them as variables), secrets masked.
    return [Run(args["cmd"], "run " + printable(mask_secrets(command_display(args["cmd"])), 60))]  # it may alter anything


def _service_name(args: dict) -> str:
    if not isinstance(args["name"], str) or not SERVICE_NAME.match(args["name"]):
        raise ArgumentError(f"service: {args['name']!r} is not a unit name")
    if args["state"] not in ("started", "stopped", "restarted", "reloaded"):
        raise ArgumentError(f"service: state must be started, stopped, restarted or reloaded, not {args['state']!r}")
    return args["name"]


def _service_requests(args: dict) -> list[FactKey]:
    return [FactKey("systemd"), FactKey("service", _service_name(args))]


def plan_service(args: dict, facts: Mapping[FactKey, Any]) -> list:
    """Start/stop/restart and enable/disable a unit with systemctl; a host without systemd is a
    clear error (containers and some HPC images run none)."""
    name = _service_name(args)
    if not facts.get(FactKey("systemd")):
        raise OperationError(
            f"service {name}: systemd is not running on this host (no /run/systemd/system); start the service by other means"
        )
    state: ServiceState = facts.get(FactKey("service", name)) or ServiceState("unknown", "unknown")
    commands, active, enabled = [], state.active, state.enabled
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
            ((FactKey("service", name), ServiceState(active, enabled)),),
        )
    ]


OPERATIONS = {
    "package": Operation(
        "package",
        {"name": Arg((str, list), True), "state": Arg((str,), default="present"), "update": Arg((bool,), default=False)},
        _package_requests,
        plan_package,
        doc="packages installed with apt-get or dnf",
    ),
    "command": Operation(
        "command",
        {"cmd": Arg((str,), True), "creates": Arg((str,)), "unless": Arg((str,))},
        _command_requests,
        plan_command,
        doc="a shell command, skipped by creates/unless",
    ),
    "service": Operation(
        "service",
        {"name": Arg((str,), True), "state": Arg((str,), default="started"), "enabled": Arg((bool,))},
        _service_requests,
        plan_service,
        doc="a systemd service",
    ),
}
