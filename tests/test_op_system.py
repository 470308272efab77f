"""Package, command and service operations as data."""

import pytest

from provision.operations import OPERATIONS
from provision.operations.base import ArgumentError, FactKey, OperationError, ServiceState


def plan(op, args, facts):
    operation = OPERATIONS[op]
    return operation.plan(operation.check_args(args), facts)


P = FactKey("pkgmgr")
CASES = [
    (
        "apt-missing",
        "package",
        {"name": ["openssh-client", "rsync"]},
        {P: "apt", FactKey("package", "openssh-client"): "1:9.2", FactKey("package", "rsync"): None},
        ["DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends rsync"],
    ),
    (
        "apt-update",
        "package",
        {"name": "rsync", "update": True},
        {P: "apt"},
        [
            "DEBIAN_FRONTEND=noninteractive apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends rsync"  # noqa: E501 - one literal, kept whole to be read or grepped
        ],
    ),
    ("dnf-missing", "package", {"name": "rsync"}, {P: "dnf"}, ["dnf install -y -q rsync"]),
    ("present", "package", {"name": "rsync"}, {P: "apt", FactKey("package", "rsync"): "3.2"}, []),
    (
        "remove",
        "package",
        {"name": "rsync", "state": "absent"},
        {P: "apt", FactKey("package", "rsync"): "3.2"},
        ["DEBIAN_FRONTEND=noninteractive apt-get remove -y -q rsync"],
    ),
    ("cmd-runs", "command", {"cmd": "touch /x"}, {}, ["touch /x"]),
    ("cmd-creates", "command", {"cmd": "touch /x", "creates": "/x"}, {FactKey("file", "/x"): object()}, []),
    ("cmd-creates-absent", "command", {"cmd": "touch /x", "creates": "/x"}, {FactKey("file", "/x"): None}, ["touch /x"]),
    ("cmd-unless-0", "command", {"cmd": "touch /x", "unless": "test -e /x"}, {FactKey("command", "test -e /x"): 0}, []),
    ("cmd-unless-1", "command", {"cmd": "touch /x", "unless": "test -e /x"}, {FactKey("command", "test -e /x"): 1}, ["touch /x"]),
    (
        "svc-start",
        "service",
        {"name": "ssh", "enabled": True},
        {FactKey("systemd"): True, FactKey("service", "ssh"): ServiceState("inactive", "disabled")},
        ["systemctl start ssh && systemctl enable ssh"],
    ),
    (
        "svc-ok",
        "service",
        {"name": "ssh", "enabled": True},
        {FactKey("systemd"): True, FactKey("service", "ssh"): ServiceState("active", "enabled")},
        [],
    ),
    (
        "svc-restart",
        "service",
        {"name": "ssh", "state": "restarted"},
        {FactKey("systemd"): True, FactKey("service", "ssh"): ServiceState("active", "enabled")},
        ["systemctl restart ssh"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_plans(case):
    _id, op, args, facts, commands = case
    assert [c.command for c in plan(op, args, facts)] == commands


def test_no_package_manager():
    with pytest.raises(OperationError, match="apt-get nor dnf"):
        plan("package", {"name": "rsync"}, {P: None})


def test_service_without_systemd_is_a_clear_message():
    with pytest.raises(OperationError, match="systemd is not running"):
        plan("service", {"name": "ssh"}, {FactKey("systemd"): False})


@pytest.mark.parametrize(
    "op,args",
    [
        ("package", {"name": "rsync; reboot"}),
        ("package", {"name": "rsync", "state": "latest"}),
        ("service", {"name": "ssh$(x)"}),
        ("service", {"name": "ssh", "state": "running"}),
        ("command", {"cmd": "x", "creates": "relative"}),
    ],
)
def test_bad_arguments(op, args):
    with pytest.raises(ArgumentError):
        operation = OPERATIONS[op]
        checked = operation.check_args(args)
        operation.requests(checked)


def test_a_command_shows_its_values_for_display_only():
    from provision.templating import command_text, render_value

    cmd = render_value("echo {{ x }} >{{ path }}", {"x": "it's a\x1b[2Jvalue", "path": "/tmp/out"}, shell=True)
    operation = OPERATIONS["command"]
    (change,) = operation.plan(operation.check_args({"cmd": cmd}), {})
    # shown as the one word it is passed as, control characters made harmless
    assert change.describe == "run echo 'it'\"'\"'s a?[2Jvalue' >/tmp/out"
    assert "_pv" not in change.describe
    # what runs still passes every value as a shell variable
    assert change.command == cmd and "it's" not in command_text(change.command)


def test_a_command_display_masks_secrets():
    from provision.templating import render_value

    cmd = render_value("set-db --password={{ pw }} --user {{ u }}", {"pw": "hunter2 two", "u": "admin"}, shell=True)
    operation = OPERATIONS["command"]
    (change,) = operation.plan(operation.check_args({"cmd": cmd}), {})
    assert "hunter2" not in change.describe and change.describe.startswith("run set-db --password=********")
