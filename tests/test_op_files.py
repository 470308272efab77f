"""File operations as data: (arguments, facts) -> expected changes, no SSH (pyinfra's test style)."""

import hashlib

import pytest

from provision.errors import ArgumentError
from provision.operations import OPERATIONS
from provision.operations.base import FileState, OperationError, Run, StateKey, Write
from provision.operations.files import edit_block, edit_line


def f(content: bytes | None, mode=0o644, owner="root", group="root", kind="f"):
    sha = hashlib.sha256(content).hexdigest() if content is not None else None
    return FileState(kind, mode, owner, group, sha, content)


def plan(op, args, facts):
    operation = OPERATIONS[op]
    checked = operation.check_args(args)
    return operation.plan(checked, facts)


def FK(path):
    return StateKey("file", path)


CASES = [
    # (id, op, args, facts, expected: list of (type, substring of command or path))
    (
        "dir-absent",
        "directory",
        {"path": "/data/x", "mode": "0750", "owner": "alice"},
        {FK("/data/x"): None},
        [(Run, "mkdir -p -- /data && mkdir -m 0750 -- /data/x && chown -h alice /data/x")],
    ),
    ("dir-ok", "directory", {"path": "/data/x", "mode": "0755"}, {FK("/data/x"): f(None, 0o755, kind="d")}, []),
    (
        "dir-mode",
        "directory",
        {"path": "/data/x/", "mode": 0o700},
        {FK("/data/x"): f(None, 0o755, kind="d")},
        [(Run, "chmod 0700 /data/x")],
    ),
    (
        "dir-home",
        "directory",
        {"path": "~alice/.ssh", "mode": "700"},
        {FK("~alice/.ssh"): None},
        [(Run, 'mkdir -p -- "${H_616c696365}" && mkdir -m 0700 -- "${H_616c696365}"/.ssh')],
    ),
    ("file-create", "file", {"path": "/etc/motd", "content": "hi\n"}, {FK("/etc/motd"): None}, [(Write, "/etc/motd")]),
    ("file-same", "file", {"path": "/etc/motd", "content": "hi\n"}, {FK("/etc/motd"): f(b"hi\n")}, []),
    (
        "file-owner",
        "file",
        {"path": "/etc/motd", "content": "hi\n", "owner": "bob"},
        {FK("/etc/motd"): f(b"hi\n")},
        [(Run, "chown -h bob /etc/motd")],
    ),
    (
        "file-differs",
        "file",
        {"path": "/etc/motd", "content": "new\n"},
        {FK("/etc/motd"): f(b"old\n", 0o600)},
        [(Write, "/etc/motd")],
    ),
    (
        "line-append",
        "line",
        {"path": "/etc/hosts", "line": "10.0.0.1 a"},
        {FK("/etc/hosts"): f(b"127.0.0.1 lo\n")},
        [(Write, "/etc/hosts")],
    ),
    ("line-present", "line", {"path": "/etc/hosts", "line": "10.0.0.1 a"}, {FK("/etc/hosts"): f(b"10.0.0.1 a\nx\n")}, []),
    ("line-absent-file-absent", "line", {"path": "/etc/x", "line": "a", "state": "absent"}, {FK("/etc/x"): None}, []),
    (
        "block-same",
        "block",
        {"path": "/etc/x", "block": "a\nb"},
        {FK("/etc/x"): f(b"top\n# BEGIN provision managed block\na\nb\n# END provision managed block\n")},
        [],
    ),
    (
        "download-same",
        "download",
        {"path": "/opt/i.sh", "url": "https://e.org/i.sh", "sha256": hashlib.sha256(b"x").hexdigest()},
        {FK("/opt/i.sh"): f(b"x")},
        [],
    ),
    (
        "download-needed",
        "download",
        {"path": "/opt/i.sh", "url": "https://e.org/i.sh", "sha256": "A" * 64},
        {FK("/opt/i.sh"): f(b"x")},
        [(Run, "sha256 mismatch")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_plans(case):
    _id, op, args, facts, expected = case
    changes = plan(op, args, facts)
    assert len(changes) == len(expected), changes
    for change, (kind, text) in zip(changes, expected, strict=False):
        assert isinstance(change, kind)
        assert text in (change.command if isinstance(change, Run) else change.path)


def test_write_keeps_mode_and_owner_of_existing_file():
    (change,) = plan("file", {"path": "/etc/motd", "content": "new\n"}, {FK("/etc/motd"): f(b"old\n", 0o600, "bob", "staff")})
    assert (change.mode, change.owner, change.group, change.old, change.content) == (0o600, "bob", "staff", b"old\n", b"new\n")


def test_new_file_facts_predicted():
    (change,) = plan("file", {"path": "/etc/motd", "content": "a"}, {})
    ((key, state),) = change.effects
    assert key == FK("/etc/motd") and state.content == b"a" and state.mode == 0o644


LINE_CASES = [
    ("a\nb\n", "c", None, True, "a\nb\nc\n"),
    ("a\nport=1\nb\n", "port=2", r"^port=", True, "a\nport=2\nb\n"),
    ("a\nb\n", "b", None, False, "a\n"),
    ("", "x", None, True, "x\n"),
    ("a\nb", "b", None, True, "a\nb\n"),
]


@pytest.mark.parametrize("text,line,regexp,present,expected", LINE_CASES)
def test_edit_line(text, line, regexp, present, expected):
    assert edit_line(text, line, regexp, present) == expected


def test_edit_block_replaces_only_the_block():
    marker = "# {mark} m"
    first = edit_block("keep1\n", "x\ny", marker)
    assert first == "keep1\n# BEGIN m\nx\ny\n# END m\n"
    second = edit_block(first + "keep2\n", "z", marker)
    assert second == "keep1\n# BEGIN m\nz\n# END m\nkeep2\n"
    assert edit_block(second, "z", marker) == second
    assert edit_block(second, "", marker) == "keep1\nkeep2\n"


BAD = [
    ("directory", {"path": "relative/x"}, ArgumentError, "absolute"),
    ("directory", {"path": "/a/../etc"}, ArgumentError, ".."),
    ("directory", {"path": "/a", "owner": "bob;rm -rf /"}, ArgumentError, "owner name"),
    ("directory", {"path": "/a", "mode": "rwx"}, ArgumentError, "octal"),
    ("directory", {"path": "/a", "colour": "red"}, ArgumentError, "unknown argument 'colour' (valid: group, mode, owner, path)"),
    ("file", {"path": "/a"}, ArgumentError, "missing argument 'content'"),
    ("download", {"path": "/a", "url": "file:///etc/passwd", "sha256": "0" * 64}, ArgumentError, "URL"),
    ("download", {"path": "/a", "url": "https://x/y", "sha256": "abc"}, ArgumentError, "64 hex"),
    ("line", {"path": "/a", "line": "x", "regexp": "("}, ArgumentError, "bad regexp"),
]


@pytest.mark.parametrize("op,args,error,text", BAD)
def test_bad_arguments(op, args, error, text):
    with pytest.raises(error, match=None) as caught:
        plan(op, args, {FK("/a"): None})
    assert text in str(caught.value)


def test_directory_over_a_file_is_a_host_error():
    with pytest.raises(OperationError, match="not a folder"):
        plan("directory", {"path": "/a"}, {FK("/a"): f(b"x")})


def test_line_in_missing_file_without_create():
    with pytest.raises(OperationError, match="/a does not exist: this task edits an existing file and never creates it"):
        plan("line", {"path": "/a", "line": "x"}, {FK("/a"): None})


def test_block_in_missing_file_with_create_false_is_refused():
    # The Slurm role: a node without slurm.conf is a host error, never a slurm.conf of node lines alone.
    with pytest.raises(OperationError, match="/etc/slurm/slurm.conf does not exist"):
        plan(
            "block",
            {"path": "/etc/slurm/slurm.conf", "block": "NodeName=a", "create": False},
            {FK("/etc/slurm/slurm.conf"): None},
        )
    (change,) = plan("block", {"path": "/etc/x", "block": "a"}, {FK("/etc/x"): None})  # create: true by default
    assert change.content == b"# BEGIN provision managed block\na\n# END provision managed block\n"


# -- refusals: a link, a foreign hard link, a folder another user can write (issue 14) --------
LINK = FileState("l", 0o777, "alice", "alice")
HARD = FileState("h", 0o640, "root", "shadow")
BELOW = FileState("u", 0o755, "alice", "alice", below="/home/alice")
REFUSALS = [
    ("directory", {"path": "~alice/.ssh", "owner": "alice", "mode": "0700"}, "~alice/.ssh"),
    ("file", {"path": "~alice/.jupyter/x", "content": "x"}, "~alice/.jupyter/x"),
    ("line", {"path": "~alice/.bashrc", "line": "x"}, "~alice/.bashrc"),
    ("block", {"path": "/etc/bash.bashrc", "block": "x"}, "/etc/bash.bashrc"),
    ("download", {"path": "/data/f", "url": "https://e.org/f", "sha256": "0" * 64}, "/data/f"),
]


@pytest.mark.parametrize("state,why", [(LINK, "symbolic link"), (HARD, "hard link"), (BELOW, "below a folder")])
@pytest.mark.parametrize("op,args,path", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refused_paths(op, args, path, state, why):
    operation = OPERATIONS[op]
    with pytest.raises(OperationError) as error:
        operation.decide(operation.check_args(args), {FK(path): state})
    assert str(error.value).startswith(f"{path} ") and why in str(error.value) and "\n" not in str(error.value)


def test_refusal_names_the_folder_and_its_owner():
    operation = OPERATIONS["file"]
    with pytest.raises(OperationError, match=r"/home/alice, owner alice, mode 0755"):
        operation.decide(operation.check_args({"path": "/home/alice/x", "content": "x"}), {FK("/home/alice/x"): BELOW})


def test_new_secret_is_0600_and_its_backup_never_wider():
    (change,) = plan("file", {"path": "/etc/app.key", "content": "k", "secret": True}, {FK("/etc/app.key"): None})
    assert change.mode == 0o600 and change.effects[0][1].mode == 0o600
    (kept,) = plan("file", {"path": "/etc/app.key", "content": "k2", "secret": True}, {FK("/etc/app.key"): f(b"k", 0o640)})
    assert kept.mode == 0o640  # an existing file keeps its mode unless told
