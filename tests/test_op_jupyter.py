"""Jupyter operations as data: the argon2 hash in Jupyter Server's format made on the controller,
a valid existing hash kept (idempotence), the password never in a change's description or diff,
ports unique per node and free, bad input before any host is touched."""

import os

import pytest

from provision.engine.task import unified_diff
from provision.errors import ArgumentError
from provision.operations import OPERATIONS
from provision.operations.base import FileState, OperationError, StateKey, UserEntry, Write
from provision.operations.jupyter import existing_hash, hash_matches, hash_password, mask_config, read_password

SECRET = "correct horse battery staple"


@pytest.fixture
def password_file(tmp_path):
    path = tmp_path / "alice.jupyter"
    path.write_text(SECRET + "\n")
    return path


def config_args(password_file, **extra):
    return {
        "user": "alice",
        "path": "~alice/.jupyter/jupyter_server_config.py",
        "port": 8888,
        "password_file": password_file.name,
        "base_dir": str(password_file.parent),
        "root_dir": "~",
        "certfile": "~/.jupyter/c.crt",
        "keyfile": "~/.jupyter/c.key",
        **extra,
    }


def plan(op, args, facts):
    operation = OPERATIONS[op]
    checked = operation.check_args(args)
    operation.requests(checked)
    return operation.plan(checked, facts)


def test_hash_is_jupyter_servers_argon2_format():
    hashed = hash_password(SECRET)
    assert hashed.startswith("argon2:$argon2id$v=19$m=10240,t=10,p=8$")
    assert hash_matches(hashed, SECRET) and not hash_matches(hashed, "wrong")
    assert not hash_matches("sha1:abc:def", SECRET)


def test_config_written_0600_with_hash_and_secure_defaults(password_file):
    key = StateKey("file", "~alice/.jupyter/jupyter_server_config.py")
    [write] = plan("jupyter_config", config_args(password_file), {key: None})
    assert isinstance(write, Write) and write.mode == 0o600 and write.owner == "alice" and write.group == "alice"
    text = write.content.decode()
    # issue 33 finding 4: a Unix socket in her own folder, no TCP port on the node (Jupyter Server
    # refuses --port with --sock, serverapp.py: "Options --port and --sock are mutually exclusive")
    assert 'c.ServerApp.sock = "/var/lib/provision-jupyter/alice/jupyter.sock"\nc.ServerApp.sock_mode = "0600"\n' in text
    assert "c.ServerApp.port" not in text and "c.ServerApp.ip" not in text and "c.ServerApp.open_browser = False" in text
    assert "c.ServerApp.allow_remote_access = False" in text and "c.ServerApp.certfile" in text
    assert hash_matches(existing_hash(write.content), SECRET)
    assert SECRET not in text and SECRET not in write.describe
    assert write.secret
    # Issue 26: --diff showed only "(content hidden: secret)"; now the hash's line is masked, the rest shown.
    diff = unified_diff(write)
    assert "argon2" not in diff and existing_hash(write.content) not in diff and "(content hidden" not in diff
    assert "+c.ServerApp.sock = " in diff and "+c.PasswordIdentityProvider.hashed_password = (hidden, fingerprint " in diff
    assert '+c.IdentityProvider.token = ""\n' in diff  # an empty token says nothing secret
    # A changed root folder on a converged host: one line each way, the unchanged hash's line not in the diff.
    old = FileState("f", 0o600, "alice", "alice", "0" * 64, write.content)
    [rewrite] = plan("jupyter_config", {**config_args(password_file), "root_dir": "/data"}, {key: old})
    changed = unified_diff(rewrite)
    assert '-c.ServerApp.root_dir = os.path.expanduser("~")\n' in changed and "+c.ServerApp.root_dir = os.path" in changed
    assert "hashed_password" not in changed and "argon2" not in changed


def test_a_template_that_names_the_hash_otherwise_is_hidden_whole():
    assert mask_config('c.X.hash = "argon2:abc"\n', hashes=("argon2:abc",)) == "(content hidden: secret)\n"
    assert mask_config("c.X.passwd = 'argon2:abc'\n", hashes=("argon2:abc",)).startswith("c.X.passwd = (hidden, fingerprint ")


def test_the_plan_gives_its_mask_the_hash_so_a_users_template_cannot_show_it(password_file, tmp_path):
    """The mask's whole-text fallback is wired to the run: a template of the user's that writes the
    hash under a name the line mask does not know makes --diff hide the file; so does the node's
    old file that carries its hash outside the hashed_password line (a comment)."""
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "mine.py.j2").write_text('c.ServerApp.port = {{ port }}\nc.My.hash = "{{ hashed_password }}"\n')
    key = StateKey("file", "~alice/.jupyter/jupyter_server_config.py")
    args = config_args(password_file, template="mine.py.j2", template_dirs=[str(folder)])
    [write] = plan("jupyter_config", args, {key: None})
    assert 'c.My.hash = "argon2:' in write.content.decode()
    diff = unified_diff(write)
    assert "argon2" not in diff and "(content hidden: secret)" in diff
    old_hash = hash_password("the old one")
    old_text = f'# kept: {old_hash}\nc.PasswordIdentityProvider.hashed_password = "{old_hash}"\n'.encode()
    old = FileState("f", 0o600, "alice", "alice", "0" * 64, old_text)
    [rewrite] = plan("jupyter_config", config_args(password_file), {key: old})
    assert "argon2" not in unified_diff(rewrite)
    # Hidden on both sides (the user's template, a new port): the diff says so instead of showing nothing.
    mine = FileState("f", 0o600, "alice", "alice", "0" * 64, write.content)
    [moved] = plan("jupyter_config", {**args, "port": 8899}, {key: mine})
    assert unified_diff(moved).endswith("(content hidden: secret)\n") and "argon2" not in unified_diff(moved)


def test_existing_valid_hash_is_kept_so_a_converged_host_is_ok(password_file):
    key = StateKey("file", "~alice/.jupyter/jupyter_server_config.py")
    [write] = plan("jupyter_config", config_args(password_file), {key: None})
    state = FileState("f", 0o600, "alice", "alice", __import__("hashlib").sha256(write.content).hexdigest(), write.content)
    assert plan("jupyter_config", config_args(password_file), {key: state}) == []


def with_parameters(hashed, **changes):
    """``hashed`` with other argon2 parameters in its header (what a hostile node can write)."""
    prefix, variant, version, params, salt, digest = hashed.split("$")
    values = dict(item.split("=") for item in params.split(","))
    values.update({k: str(v) for k, v in changes.items() if k in ("m", "t", "p")})
    variant = changes.get("variant", variant)
    digest = changes.get("digest", digest)
    return "$".join([prefix, variant, version, ",".join(f"{k}={v}" for k, v in values.items()), salt, digest])


@pytest.mark.parametrize(
    "changes",
    [{"m": 4194304}, {"t": 100000}, {"p": 64}, {"variant": "argon2i"}, {"digest": "A" * 4000}],
    ids=["memory", "time", "lanes", "type", "hash_len"],
)
def test_hash_with_other_parameters_is_no_match_and_never_verified(password_file, monkeypatch, changes):
    import argon2

    hostile = with_parameters(hash_password(SECRET), **changes)

    def refuse(*args, **kwargs):
        raise AssertionError("verified a hash with parameters provision never writes")

    monkeypatch.setattr(argon2.PasswordHasher, "verify", refuse)
    monkeypatch.setattr(argon2.low_level, "verify_secret", refuse)
    assert not hash_matches(hostile, SECRET)
    key = StateKey("file", "~alice/.jupyter/jupyter_server_config.py")
    content = f'c.PasswordIdentityProvider.hashed_password = "{hostile}"\n'.encode()
    state = FileState("f", 0o600, "alice", "alice", "0" * 64, content)
    if len(hostile) <= 400:
        assert existing_hash(content) == hostile
    [write] = plan("jupyter_config", config_args(password_file), {key: state})  # rewritten with a fresh hash of ours
    assert existing_hash(write.content).startswith("argon2:$argon2id$v=19$m=10240,t=10,p=8$")


def test_hash_with_our_parameters_is_verified(monkeypatch):
    import argon2

    hashed = hash_password(SECRET)
    calls = []
    verify = argon2.PasswordHasher.verify
    monkeypatch.setattr(argon2.PasswordHasher, "verify", lambda self, *a: calls.append(a) or verify(self, *a))
    assert hash_matches(hashed, SECRET) and len(calls) == 1


@pytest.mark.parametrize(
    "line",
    [
        "c.PasswordIdentityProvider.hashed_password = 'argon2:$argon2id$abc\nimport os'\n",
        'c.PasswordIdentityProvider.hashed_password = "argon2:$argon2id$abc\nimport os"\n',
        'c.PasswordIdentityProvider.hashed_password = "argon2:$argon2id$abc\\"x"\n',
    ],
    ids=["single-quoted-over-two-lines", "double-quoted-over-two-lines", "escaped-quote"],
)
def test_hash_line_never_spans_lines_or_quotes(line):
    assert existing_hash(line.encode()) is None


def test_changed_password_rewrites_the_config_with_a_backup(password_file):
    key = StateKey("file", "~alice/.jupyter/jupyter_server_config.py")
    [write] = plan("jupyter_config", config_args(password_file), {key: None})
    state = FileState("f", 0o600, "alice", "alice", __import__("hashlib").sha256(write.content).hexdigest(), write.content)
    password_file.write_text("another one\n")
    [again] = plan("jupyter_config", config_args(password_file), {key: state})
    assert again.old == write.content and hash_matches(existing_hash(again.content), "another one")


def test_all_interfaces_needs_her_own_certificate(password_file):
    """Issue 33 finding 4: on a TCP port any user can stand in for her server while it is down;
    only a certificate her browser verifies tells it apart, never the self-signed default."""
    for missing in ({"certfile": None}, {"keyfile": None}, {"certfile": None, "keyfile": None}):
        with pytest.raises(ArgumentError) as caught:
            plan("jupyter_config", config_args(password_file, listen="all", **missing), {})
        assert str(caught.value).startswith("jupyter_listen: all needs jupyter_certfile and jupyter_keyfile for alice: ")
    [write] = plan(
        "jupyter_config",
        config_args(password_file, listen="all"),
        {StateKey("file", "~alice/.jupyter/jupyter_server_config.py"): None},
    )
    text = write.content.decode()
    assert 'c.ServerApp.ip = "0.0.0.0"' in text and "c.ServerApp.port = 8888\n" in text and "sock" not in text
    [local] = plan(
        "jupyter_config",
        config_args(password_file, certfile=None, keyfile=None),
        {StateKey("file", "~alice/.jupyter/jupyter_server_config.py"): None},
    )
    assert 'c.ServerApp.certfile = os.path.expanduser("~/.jupyter/jupyter-selfsigned.crt")' in local.content.decode()


@pytest.mark.parametrize("content,message", [(None, "No such file"), ("", "empty"), ("\nx\n", "empty")])
def test_unreadable_or_empty_password_file_is_bad_input(tmp_path, content, message):
    path = tmp_path / "pw"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ArgumentError, match=message):
        read_password(str(path))
    with pytest.raises(ArgumentError, match=f"jupyter password file {path}"):
        plan("jupyter_config", config_args(path), {})


def test_a_password_file_that_is_a_fifo_or_a_link_is_refused_at_once(tmp_path):
    """A FIFO held setup-cluster forever (open() waits for a writer); a link may lead to anyone's
    file. Both: one line naming the file, before any host is touched. In a child process with a
    generous bound: a hang on the FIFO fails the test instead of the suite."""
    import subprocess
    import sys

    fifo, target, link = tmp_path / "pw.fifo", tmp_path / "real", tmp_path / "pw.link"
    os.mkfifo(fifo)
    target.write_text(SECRET + "\n")
    link.symlink_to(target)
    code = (
        "import sys\nfrom provision.operations.jupyter import read_password\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n        read_password(path)\n    except Exception as error:\n        print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(fifo), str(link)], capture_output=True, text=True, timeout=60)
    said = done.stdout.splitlines()
    assert said[0].startswith(f"jupyter password file {fifo}: is a FIFO") and "refused" in said[0], done
    assert said[1].startswith(f"jupyter password file {link}: is a link") and SECRET not in done.stdout, done


def test_unreadable_password_file_message_never_holds_content(tmp_path):
    path = tmp_path / "pw"
    path.write_bytes(b"\xff\xfe" + SECRET.encode())
    with pytest.raises(ArgumentError) as error:
        read_password(str(path))
    assert SECRET not in str(error.value)


USERS = [
    {"name": "alice", "uid": 2001, "jupyter_port": 8888},
    {"name": "bob", "uid": 2002, "jupyter_port": 8889},
    {"name": "carol", "uid": 2003},
]


def user_facts(listening):
    return {
        StateKey("listening"): listening,
        StateKey("user", "alice"): UserEntry("alice", 2001, 2001, "/home/alice", "/bin/bash"),
        StateKey("user", "bob"): UserEntry("bob", 2002, 2002, "/home/bob", "/bin/bash"),
    }


def test_ports_free_or_held_by_the_user_itself():
    assert plan("jupyter_ports", {"users": USERS, "listen": "all"}, user_facts({22: 0, 8888: 2001})) == []


def test_port_taken_by_another_user_is_named():
    with pytest.raises(OperationError, match=r"port 8889 of bob is already in use \(by uid 0\)"):
        plan("jupyter_ports", {"users": USERS, "listen": "all"}, user_facts({8889: 0}))


def test_on_her_socket_no_port_of_the_node_is_read():
    """listen: localhost (the default): her port is her own machine's end of the tunnel."""
    assert OPERATIONS["jupyter_ports"].requests(OPERATIONS["jupyter_ports"].check_args({"users": USERS})) == []
    assert plan("jupyter_ports", {"users": USERS}, user_facts({8889: 0})) == []
    with pytest.raises(ArgumentError, match="listen must be localhost or all"):
        OPERATIONS["jupyter_ports"].requests({"users": USERS, "listen": "everywhere"})


def test_two_users_with_one_port_is_bad_input():
    users = [*USERS[:1], {"name": "bob", "uid": 2002, "jupyter_port": 8888}]
    with pytest.raises(ArgumentError, match="alice both have jupyter_port 8888|bob and alice both have jupyter_port 8888"):
        OPERATIONS["jupyter_ports"].requests({"users": users})


@pytest.mark.parametrize("port", [80, 70000, "x", True])
def test_bad_port(port):
    with pytest.raises(ArgumentError, match="jupyter_port"):
        OPERATIONS["jupyter_ports"].requests({"users": [{"name": "alice", "uid": 1, "jupyter_port": port}]})


def test_prompted_password_is_an_argument_of_the_run_not_process_state():
    """--ask-jupyter-pass: the run gives the operation the asked password as its ``password``
    argument (RunOptions.prompted); nothing is kept in the process for a later run (issue 25)."""
    import provision.operations.jupyter as jupyter

    args = {
        "user": "bob",
        "path": "~bob/.jupyter/jupyter_server_config.py",
        "port": 8889,
        "root_dir": "~",
        "certfile": "~/.jupyter/c.crt",
        "keyfile": "~/.jupyter/c.key",
    }
    with pytest.raises(ArgumentError, match="no password for bob: set jupyter_password_file, or run with --ask-jupyter-pass"):
        plan("jupyter_config", args, {})
    asked = jupyter.checked_password("bob", "asked-at-the-prompt")
    [write] = plan(
        "jupyter_config", {**args, "password": asked}, {StateKey("file", "~bob/.jupyter/jupyter_server_config.py"): None}
    )
    assert hash_matches(existing_hash(write.content), "asked-at-the-prompt")
    with pytest.raises(ArgumentError, match="no password for bob"):  # the next run without it has none
        plan("jupyter_config", args, {})
    with pytest.raises(ArgumentError, match="empty or more than one line"):
        jupyter.checked_password("bob", "")


@pytest.mark.parametrize("kind", ["l", "h", "u"])
def test_config_through_a_link_refused(password_file, kind):
    operation = OPERATIONS["jupyter_config"]
    key = StateKey("file", "~alice/.jupyter/jupyter_server_config.py")
    bad = FileState(kind, 0o777, "alice", "alice", below="/home/alice" if kind == "u" else None)
    with pytest.raises(OperationError, match=r"^~alice/.jupyter/jupyter_server_config.py .*refused$"):
        operation.decide(operation.check_args(config_args(password_file)), {key: bad})
