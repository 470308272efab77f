"""NFS operations as data: (arguments, facts) -> changes or a refusal, no SSH."""

import hashlib

import pytest

from provision.errors import ArgumentError
from provision.operations import OPERATIONS
from provision.operations.base import FileState, OperationError, Run, StateKey, Write
from provision.operations.nfs import check_clients, fstab_line


def plan(op, args, facts):
    operation = OPERATIONS[op]
    checked = operation.check_args(args)
    operation.requests(checked)
    return operation.plan(checked, facts)


def text_file(content: bytes) -> FileState:
    return FileState("f", 0o644, "root", "root", hashlib.sha256(content).hexdigest(), content)


FSTAB = StateKey("file", "/etc/fstab")
MOUNT = StateKey("mount", "/data/imagenet")
CAN = StateKey("nfsmount")
DIR = StateKey("file", "/data/imagenet")
ARGS = {"server": "172.18.0.2", "path": "/data/imagenet"}
LINE = "172.18.0.2:/data/imagenet /data/imagenet nfs ro,_netdev,nofail,vers=4 0 0"


def test_fstab_line_ro_by_default_and_rw_on_request():
    assert fstab_line({**ARGS, "mode": "ro", "options": None}) == LINE
    assert fstab_line({**ARGS, "mode": "rw", "options": None}).split()[3].startswith("rw,")
    assert fstab_line({"server": "fd00::2", "path": "/d", "mode": "ro", "options": None}).startswith("[fd00::2]:/d ")


def test_fresh_client_that_can_mount():
    changes = plan("nfs_mount", ARGS, {MOUNT: None, CAN: (), DIR: None, FSTAB: text_file(b"# fstab\n")})
    assert [type(c) for c in changes] == [Run, Write, Run]
    assert changes[0].command == "mkdir -p /data/imagenet"
    assert changes[1].content == f"# fstab\n{LINE}\n".encode()
    assert changes[2].command == "mount /data/imagenet"


def test_client_that_cannot_mount_gets_the_line_but_no_mount_attempt():
    changes = plan(
        "nfs_mount",
        ARGS,
        {MOUNT: None, CAN: ("no privilege to mount (CAP_SYS_ADMIN)",), DIR: FileState("d", 0o755), FSTAB: text_file(b"")},
    )
    assert [type(c) for c in changes] == [Write]
    result = OPERATIONS["nfs_mount"].result(
        OPERATIONS["nfs_mount"].check_args(ARGS), {CAN: ("no privilege to mount (CAP_SYS_ADMIN)",)}
    )
    assert result == {"path": "/data/imagenet", "mountable": False, "missing": ["no privilege to mount (CAP_SYS_ADMIN)"]}


def test_line_never_duplicated_and_user_options_kept():
    mine = b"172.18.0.2:/data/imagenet /data/imagenet nfs ro,hard 0 0\n"
    assert plan("nfs_mount", ARGS, {MOUNT: None, CAN: ("x",), DIR: FileState("d"), FSTAB: text_file(mine)}) == []


def test_converged_mount_is_ok():
    assert (
        plan(
            "nfs_mount",
            ARGS,
            {MOUNT: ("172.18.0.2:/data/imagenet", "nfs4"), CAN: (), DIR: FileState("d"), FSTAB: text_file(f"{LINE}\n".encode())},
        )
        == []
    )


def test_mount_point_that_is_a_mount_of_something_else_is_refused():
    with pytest.raises(OperationError, match=r"/data/imagenet is already a mount of tmpfs \(tmpfs\); refusing"):
        plan("nfs_mount", ARGS, {MOUNT: ("tmpfs", "tmpfs"), CAN: (), DIR: FileState("d"), FSTAB: text_file(b"")})


def test_fstab_claiming_the_mount_point_for_another_source_is_refused():
    other = b"/dev/sdb1 /data/imagenet ext4 defaults 0 2\n"
    with pytest.raises(OperationError, match="already mounts something else"):
        plan("nfs_mount", ARGS, {MOUNT: None, CAN: (), DIR: FileState("d"), FSTAB: text_file(other)})


@pytest.mark.parametrize(
    "args",
    [
        {"server": "a;b", "path": "/d"},
        {"server": "s", "path": "/d x"},
        {"server": "s", "path": "/"},
        {"server": "s", "path": "/d", "options": "ro 0 0\n/x"},
    ],
)
def test_bad_mount_arguments(args):
    with pytest.raises(ArgumentError):
        plan("nfs_mount", args, {})


def test_dataset_missing_is_refused_unless_create():
    key = StateKey("file", "/data/imagenet")
    with pytest.raises(OperationError, match="does not exist on the NFS server .*nfs_create_missing: true"):
        plan("nfs_dataset", {"path": "/data/imagenet"}, {key: None})
    [change] = plan("nfs_dataset", {"path": "/data/imagenet", "create": True}, {key: None})
    assert change.command == "mkdir -p /data/imagenet && chmod 0755 /data/imagenet"
    assert plan("nfs_dataset", {"path": "/data/imagenet"}, {key: FileState("d")}) == []
    with pytest.raises(OperationError, match="not a folder"):
        plan("nfs_dataset", {"path": "/data/imagenet"}, {key: text_file(b"x")})


@pytest.mark.parametrize(
    "nfsd,asked,expected",
    [
        ("kernel", "auto", "kernel"),
        ("none", "auto", "ganesha"),
        ("kernel", "ganesha", "ganesha"),
        ("none", "ganesha", "ganesha"),
    ],
)
def test_server_kind(nfsd, asked, expected):
    operation = OPERATIONS["nfs_server_kind"]
    args = operation.check_args({"server": asked, "clients": ["10.0.0.1"]})
    assert operation.result(args, {StateKey("nfsd"): nfsd}) == {"server": expected, "clients": ["10.0.0.1"], "systemd": False}
    # under systemd the package's nfs-ganesha service serves the exports (the role reads it registered)
    assert operation.result(args, {StateKey("nfsd"): nfsd, StateKey("systemd"): True})["systemd"] is True


# (nfs_clients entry, the refusal) as exports(5) reads a client: an address, a network with its
# prefix length, or a host name; never *, a wildcard, everyone as a network, or a value that only
# looks right (a trailing newline: Python's $ would have let it through).
CLIENT_REFUSALS = [
    ("10.0.0.0/24\n", r"'10.0.0.0/24\\x0a' is not an address, network"),
    ("10.0.0.1\n", r"'10.0.0.1\\x0a' is not an address"),
    ("10.0.0.1/24", r"has host bits set \(did you mean 10.0.0.0/24\?\)"),
    ("10.0.0.0/33", r"network '10.0.0.0/33'"),
    ("fd00::/129", r"network 'fd00::/129'"),
    ("0.0.0.0/0", r"is every address, like \*: never allowed"),
    ("node01/24", r"network 'node01/24' must be an address and a prefix length"),
    ("10.0.0.300", r"'10.0.0.300' is neither a valid address nor a host name"),
    ("node..cluster", r"neither a valid address nor a host name"),
    ("node-.cluster", r"neither a valid address nor a host name"),
    ("*.example.org", r"\* is never allowed"),
    ("@netgroup", r"is not an address"),
    ("fe80::1%eth0", r"is not an address"),
]


@pytest.mark.parametrize(("client", "message"), CLIENT_REFUSALS, ids=[repr(c[0]) for c in CLIENT_REFUSALS])
def test_nfs_clients_entry_refused(client, message):
    with pytest.raises(ArgumentError, match=r"^nfs_clients: .*" + message):
        check_clients(["10.0.0.1", client])


def test_nfs_clients_entries_taken():
    clients = ["10.0.0.74", "10.0.0.0/24", "fd00::4a", "fd00:1::/64", "node01", "node02.cluster.local", "10.0.0.74"]
    assert check_clients(clients) == clients[:-1]  # each once


@pytest.mark.parametrize("address", ["::1", "::ffff:10.0.0.7", "::/64"])
def test_an_ipv6_address_starting_with_colons_is_an_address(address):
    """Where the controller reached a host is the default client list and the clients' mount source:
    a host reached at ``localhost`` that resolved to ``::1`` was refused as 'not an address', naming
    nfs_clients, a variable the user never set."""
    assert check_clients([address]) == [address]
    if "/" not in address:
        assert fstab_line({"server": address, "path": "/d", "mode": "ro", "options": None}).startswith(f"[{address}]:/d ")


def test_kernel_asked_but_unusable_fails():
    with pytest.raises(OperationError, match="cannot serve NFS here"):
        plan("nfs_server_kind", {"server": "kernel", "clients": ["10.0.0.1"]}, {StateKey("nfsd"): "none"})


@pytest.mark.parametrize("clients", [["*"], [], ["10.0.0.1", "*.example.org"], ["10.0.0.0/24 *"], "10.0.0.1"])
def test_clients_never_star_never_empty(clients):
    with pytest.raises(ArgumentError):
        plan("nfs_server_kind", {"clients": clients}, {})


@pytest.mark.parametrize(
    "args,message",
    [
        ({"exports": [{"path": "/d", "mode": "rwx"}], "server": "n1", "hosts": ["n1"]}, "mode must be ro or rw"),
        (
            {"exports": [{"path": "/d", "colour": 1}], "server": "n1", "hosts": ["n1"]},
            r"expected \{path: /folder, mode: ro\|rw\}",
        ),
        (
            {"exports": [{"path": "/d"}], "server": "n9", "hosts": ["n1"]},
            r"nfs_server n9 is not a host of the inventory \(hosts: n1\)",
        ),
        # Issue 26: a server with no exports (or nfs_export:, a typo) crashed later on the server's
        # tasks (UndefinedError: 'dict object' has no attribute 'server'); exports with no server said "None".
        ({"exports": None, "server": "n1", "hosts": ["n1"]}, "nfs_server is n1 but nfs_exports is not set: list the folders"),
        ({"exports": [{"path": "/d"}], "server": None, "hosts": ["n1"]}, "nfs_exports is set but nfs_server is not"),
        ({"exports": [{"path": "/d"}], "server": "n1", "hosts": ["n1"], "clients": ["*"]}, "never allowed"),
    ],
)
def test_nfs_variables_checked(args, message):
    operation = OPERATIONS["nfs_check"]
    with pytest.raises(ArgumentError, match=message):
        operation.requests(operation.check_args(args))
    assert operation.requests(operation.check_args({"exports": [{"path": "/d"}], "server": "n1", "hosts": ["n1"]})) == []


def test_foreign_mount_named_by_the_node_is_shown_printable():
    with pytest.raises(OperationError) as raised:
        plan(
            "nfs_mount", ARGS, {MOUNT: ("\x1b[2Jsrv:/x", "nfs\x1b]0;t\x07"), CAN: (), DIR: FileState("d"), FSTAB: text_file(b"")}
        )
    assert "\x1b" not in str(raised.value) and "\x07" not in str(raised.value) and "srv:/x" in str(raised.value)


@pytest.mark.parametrize(
    "path",
    ["/data$(touch /tmp/owned)", "/data`id`", '/data"x', "/data'x", "/data;x", "/data\\x", "/data/x y", "/data/{a}", "/data/é"],
)
def test_export_path_with_anything_but_safe_characters_is_refused(path):
    from provision.operations.nfs import check_export_path

    with pytest.raises(ArgumentError, match="may only hold") as raised:
        check_export_path(path)
    assert "\n" not in str(raised.value)


def test_export_path_with_safe_characters_is_kept():
    from provision.operations.nfs import check_export_path

    assert check_export_path("/data/image-net_1.2+x/") == "/data/image-net_1.2+x"
