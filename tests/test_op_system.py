"""Package, command and service operations as data."""

import pytest

from provision.errors import ArgumentError
from provision.operations import OPERATIONS
from provision.operations.base import OperationError, ServiceState, StateKey
from provision.operations.os_state import OsRelease, PackageIndex
from provision.operations.system import plan_service


def plan(op, args, facts):
    operation = OPERATIONS[op]
    return operation.plan(operation.check_args(args), facts)


P = StateKey("pkgmgr")
I = StateKey("pkgindex")  # noqa: E741 - the index fact, short for the tables
OS = StateKey("os")
FRESH = {P: "apt", I: PackageIndex("apt", 600)}  # apt lists updated ten minutes ago
INSTALL = "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends"
UPDATE = "DEBIAN_FRONTEND=noninteractive apt-get update -q && "
DEBIAN = OsRelease("debian", (), "12")
UBUNTU = OsRelease("ubuntu", ("debian",), "24.04")
ROCKY = OsRelease("rocky", ("rhel", "centos", "fedora"), "9.4")
ALMA = OsRelease("almalinux", ("rhel", "centos", "fedora"), "9.4")
NFS_CLIENT = {"debian": "nfs-common", "rhel": "nfs-utils"}
CASES = [
    (
        "apt-missing",
        "package",
        {"name": ["openssh-client", "rsync"]},
        {
            **FRESH,
            StateKey("package", "openssh-client"): "1:9.2",
            StateKey("package", "rsync"): None,
            StateKey("candidate", "rsync"): "3.2.7-1",
        },
        [f"{INSTALL} rsync"],
    ),
    # issue 15: a node whose apt lists are empty (every Debian container image) refreshes first
    (
        "apt-no-lists",
        "package",
        {"name": "nfs-common"},
        {P: "apt", I: PackageIndex("apt", None)},
        [UPDATE + f"{INSTALL} nfs-common"],
    ),
    (
        "apt-stale-lists",
        "package",
        {"name": "rsync"},
        {P: "apt", I: PackageIndex("apt", 90000), StateKey("candidate", "rsync"): "3.2"},
        [UPDATE + f"{INSTALL} rsync"],
    ),
    (
        "apt-stale-but-valid-long",
        "package",
        {"name": "rsync", "cache_valid_time": 100000},
        {P: "apt", I: PackageIndex("apt", 90000), StateKey("candidate", "rsync"): "3.2"},
        [f"{INSTALL} rsync"],
    ),
    (
        "apt-future-mtime",
        "package",
        {"name": "rsync"},
        {P: "apt", I: PackageIndex("apt", -50), StateKey("candidate", "rsync"): "3.2"},
        [UPDATE + f"{INSTALL} rsync"],
    ),
    (
        "apt-fresh-no-candidate",
        "package",
        {"name": "nfs-common"},
        {**FRESH, StateKey("candidate", "nfs-common"): None},
        [UPDATE + f"{INSTALL} nfs-common"],
    ),
    (
        "apt-refreshed-this-run",  # once per run per host: apt-get's own error then says what is missing
        "package",
        {"name": "nfs-common", "update": True},
        {P: "apt", I: PackageIndex("apt", 0, refreshed=True), StateKey("candidate", "nfs-common"): None},
        [f"{INSTALL} nfs-common"],
    ),
    (
        "apt-installed-no-refresh",
        "package",
        {"name": "rsync"},
        {P: "apt", I: PackageIndex("apt", None), StateKey("package", "rsync"): "3.2"},
        [],
    ),
    (
        "dnf-no-cache",
        "package",
        {"name": "rsync"},
        {P: "dnf", I: PackageIndex("dnf", None)},
        ["dnf makecache -q && dnf install -y -q rsync"],
    ),
    (
        "dnf-fresh",
        "package",
        {"name": "rsync"},
        {P: "dnf", I: PackageIndex("dnf", 60), StateKey("candidate", "rsync"): "unknown"},
        ["dnf install -y -q rsync"],
    ),
    # issue 15: package names by the node's OS family (no RHEL image here: these cases are the test)
    (
        "family-debian",
        "package",
        {"name": NFS_CLIENT},
        {**FRESH, OS: DEBIAN, StateKey("candidate", "nfs-common"): "1:2.6.2"},
        [f"{INSTALL} nfs-common"],
    ),
    (
        "family-ubuntu",
        "package",
        {"name": NFS_CLIENT},
        {**FRESH, OS: UBUNTU, StateKey("candidate", "nfs-common"): "1:2.6.4"},
        [f"{INSTALL} nfs-common"],
    ),
    (
        "family-rocky",
        "package",
        {"name": NFS_CLIENT},
        {P: "dnf", I: PackageIndex("dnf", 60), OS: ROCKY},
        ["dnf install -y -q nfs-utils"],
    ),
    (
        "family-alma-server",
        "package",
        {"name": {"debian": "nfs-kernel-server", "rhel": ["nfs-utils"]}},
        {P: "dnf", I: PackageIndex("dnf", 60), OS: ALMA, StateKey("package", "nfs-utils"): "2.5.4"},
        [],
    ),
    (
        "apt-update",
        "package",
        {"name": "rsync", "update": True},
        {P: "apt"},
        [UPDATE + f"{INSTALL} rsync"],
    ),
    ("dnf-missing", "package", {"name": "rsync"}, {P: "dnf", I: PackageIndex("dnf", 5)}, ["dnf install -y -q rsync"]),
    ("present", "package", {"name": "rsync"}, {P: "apt", StateKey("package", "rsync"): "3.2"}, []),
    (
        "remove",
        "package",
        {"name": "rsync", "state": "absent"},
        {P: "apt", StateKey("package", "rsync"): "3.2"},
        ["DEBIAN_FRONTEND=noninteractive apt-get remove -y -q rsync"],
    ),
    ("cmd-runs", "command", {"cmd": "touch /x"}, {}, ["touch /x"]),
    ("cmd-creates", "command", {"cmd": "touch /x", "creates": "/x"}, {StateKey("exists", "/x"): True}, []),
    ("cmd-creates-absent", "command", {"cmd": "touch /x", "creates": "/x"}, {StateKey("exists", "/x"): None}, ["touch /x"]),
    ("cmd-unless-0", "command", {"cmd": "touch /x", "unless": "test -e /x"}, {StateKey("command", "test -e /x"): 0}, []),
    (
        "cmd-unless-1",
        "command",
        {"cmd": "touch /x", "unless": "test -e /x"},
        {StateKey("command", "test -e /x"): 1},
        ["touch /x"],
    ),
    (
        "svc-start",
        "service",
        {"name": "ssh", "enabled": True},
        {StateKey("systemd"): True, StateKey("service", "ssh"): ServiceState("inactive", "disabled")},
        ["systemctl start ssh && systemctl enable ssh"],
    ),
    (
        "svc-ok",
        "service",
        {"name": "ssh", "enabled": True},
        {StateKey("systemd"): True, StateKey("service", "ssh"): ServiceState("active", "enabled")},
        [],
    ),
    (
        "svc-kernel-nfs-rocky",
        "service",
        {"name": {"debian": "nfs-kernel-server", "rhel": "nfs-server"}, "enabled": True},
        {StateKey("systemd"): True, OS: ROCKY, StateKey("service", "nfs-server"): ServiceState("inactive", "disabled")},
        ["systemctl start nfs-server && systemctl enable nfs-server"],
    ),
    (
        "svc-kernel-nfs-debian",
        "service",
        {"name": {"debian": "nfs-kernel-server", "rhel": "nfs-server"}, "enabled": True},
        {StateKey("systemd"): True, OS: DEBIAN, StateKey("service", "nfs-kernel-server"): ServiceState("active", "disabled")},
        ["systemctl enable nfs-kernel-server"],
    ),
    (
        "svc-restart",
        "service",
        {"name": "ssh", "state": "restarted"},
        {StateKey("systemd"): True, StateKey("service", "ssh"): ServiceState("active", "enabled")},
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
        plan("service", {"name": "ssh"}, {StateKey("systemd"): False})


@pytest.mark.parametrize(
    "op,args",
    [
        ("package", {"name": "rsync; reboot"}),
        ("package", {"name": "rsync", "state": "latest"}),
        ("package", {"name": {"suse": "nfs-client"}}),
        ("package", {"name": "rsync", "cache_valid_time": -1}),
        ("service", {"name": {"debian": "nfs$(x)"}}),
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


def test_package_facts_cover_every_family_and_the_index():
    operation = OPERATIONS["package"]
    keys = operation.requests(operation.check_args({"name": {"debian": ["nfs-kernel-server"], "rhel": "nfs-utils"}}))
    assert set(keys) == {
        P,
        I,
        OS,
        StateKey("package", "nfs-kernel-server"),
        StateKey("package", "nfs-utils"),
        StateKey("candidate", "nfs-kernel-server"),
        StateKey("candidate", "nfs-utils"),
    }


def test_refresh_is_predicted_once_per_run():
    (change,) = plan("package", {"name": "nfs-common"}, {P: "apt", I: PackageIndex("apt", None)})
    effects = dict(change.effects)
    assert effects[I] == PackageIndex("apt", 0, refreshed=True)
    assert effects[StateKey("candidate", "nfs-common")] == "installed"
    assert "index refreshed: no package index" in change.describe
    # the next package task on this host, with candidates read before the refresh, refreshes no more
    (later,) = plan("package", {"name": "rsync"}, {P: "apt", I: effects[I], StateKey("candidate", "rsync"): None})
    assert later.command == f"{INSTALL} rsync"


@pytest.mark.parametrize("release", [OsRelease("arch", (), ""), OsRelease("opensuse-leap", ("suse", "opensuse"), "15.5"), None])
def test_unknown_family_is_named(release):
    with pytest.raises(OperationError, match="this node's OS .*family unknown.* is not one of debian, rhel"):
        plan("package", {"name": NFS_CLIENT}, {**FRESH, OS: release})


def test_a_command_shows_its_values_for_display_only():
    from provision.templating import render_value
    from provision.templating.shell import command_text

    cmd = render_value("echo {{ x }} >{{ path }}", {"x": "it's a\x1b[2Jvalue", "path": "/tmp/out"}, shell=True)
    operation = OPERATIONS["command"]
    (change,) = operation.plan(operation.check_args({"cmd": cmd}), {})
    # shown as the one word it is passed as, control characters made harmless
    assert change.describe == "run echo 'it'\"'\"'s a\\x1b[2Jvalue' >/tmp/out"
    assert "_pv" not in change.describe
    # what runs still passes every value as a shell variable
    assert change.command == cmd and "it's" not in command_text(change.command)


def test_a_command_display_masks_secrets():
    from provision.templating import render_value

    cmd = render_value("set-db --password={{ pw }} --user {{ u }}", {"pw": "hunter2 two", "u": "admin"}, shell=True)
    operation = OPERATIONS["command"]
    (change,) = operation.plan(operation.check_args({"cmd": cmd}), {})
    assert "hunter2" not in change.describe and change.describe.startswith("run set-db --password=********")


def test_daemon_reload_only_when_systemd_holds_an_older_unit_file():
    """Issue 34: the Jupyter role's `systemctl daemon-reload` was a command (`systemctl: not found`
    on a node without systemd, foreseen by no --check); it is the service operation's now."""
    args = {"name": "provision-jupyter-alice", "state": "started", "enabled": True, "daemon_reload": True}
    stale = ServiceState("inactive", "disabled", need_reload=True)
    [change] = plan_service(args, {StateKey("systemd"): True, StateKey("service", args["name"]): stale})
    assert change.command == (
        "systemctl daemon-reload && systemctl start provision-jupyter-alice && systemctl enable provision-jupyter-alice"
    )
    fresh = ServiceState("active", "enabled", need_reload=False)
    assert plan_service(args, {StateKey("systemd"): True, StateKey("service", args["name"]): fresh}) == []
    with pytest.raises(OperationError, match="systemd is not running on this host"):
        plan_service(args, {StateKey("systemd"): False, StateKey("service", args["name"]): stale})


def test_the_service_fact_reads_need_daemon_reload():
    from provision.operations.state import parse_state

    assert parse_state(StateKey("service", "x"), "inactive\ndisabled\nyes\n") == ServiceState("inactive", "disabled", True)
    assert parse_state(StateKey("service", "x"), "active\nenabled\n") == ServiceState("active", "enabled", False)
