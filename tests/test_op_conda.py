"""Anaconda operations as data: checksums checked on the controller before any host is touched,
installs skipped/refused/planned from the facts, clones per user, a block at a file's top."""

import hashlib
import os
import subprocess
import sys

import pytest

from provision.errors import ArgumentError
from provision.operations import OPERATIONS
from provision.operations.base import FileState, OperationError, Run, StateKey, Upload, Write
from provision.operations.conda import AFTER_INSTALL, IN_PROGRESS, INSTALL_TIMEOUT, MARKER
from provision.operations.files import edit_block_top


def plan(op, args, facts):
    operation = OPERATIONS[op]
    checked = operation.check_args(args)
    operation.requests(checked)
    return operation.plan(checked, facts)


def stamp(text: bytes) -> FileState:
    return FileState("f", 0o644, "root", "root", hashlib.sha256(text).hexdigest(), text)


@pytest.fixture
def installer(tmp_path):
    path = tmp_path / "Anaconda3.sh"
    path.write_bytes(b"#!/bin/bash\necho installer\n")
    return path, hashlib.sha256(path.read_bytes()).hexdigest(), hashlib.md5(path.read_bytes()).hexdigest()


P = "/opt/anaconda3"
PREFIX, MARK, DF = StateKey("file", P), StateKey("file", f"{P}/{MARKER}"), StateKey("df", P)
BUSY = StateKey("file", P + IN_PROGRESS)


def test_fresh_install_checks_and_runs_in_batch_mode_from_a_private_folder(installer):
    path, sha, _md5 = installer
    changes = plan("conda_install", {"installer": str(path), "sha256": sha, "prefix": P}, {PREFIX: None, MARK: None, DF: 10**8})
    [change] = changes  # one Run: the installer is sent over SFTP before it (never inside the script)
    assert isinstance(change, Run)
    assert change.uploads == (Upload(str(path), sha, path.stat().st_size),)
    assert change.timeout == INSTALL_TIMEOUT + AFTER_INSTALL
    assert f'timeout -k 10 {INSTALL_TIMEOUT} bash "$d/installer.sh" -b -p /opt/anaconda3' in change.command
    command = change.command
    assert path.read_bytes().decode() not in command
    assert f'ln -- "$PROVISION_UPLOADS/{sha}" "$d/installer.sh"' in command
    for part in (
        "umask 022",
        "d=$(mktemp -d /var/tmp/provision-installer.XXXXXXXX)",
        f'[ "$got" = {sha} ]',
        'bash "$d/installer.sh" -b -p /opt/anaconda3 >/dev/null; r=$?',
        "chown -R root:root /opt/anaconda3",
        "chmod -R go-w /opt/anaconda3",
        'rm -rf "$d"',
        MARKER,
    ):
        assert part in command
    assert "provision-installer-" not in command  # no predictable path in a world-writable folder
    assert command.index("mktemp -d") < command.index("got=") < command.index('bash "$d/') < command.rindex('rm -rf "$d"')


def test_install_effects_name_only_what_stays(installer):
    """Nothing is recorded for the temporary installer (the same Run removes it): no stale fact."""
    path, sha, _md5 = installer
    for installer_arg in (str(path), "https://repo.example.org/A.sh"):
        changes = plan(
            "conda_install", {"installer": installer_arg, "sha256": sha, "prefix": P}, {PREFIX: None, MARK: None, DF: 10**8}
        )
        assert not any(isinstance(c, Write) for c in changes)
        keys = [key for change in changes for key, _value in change.effects]
        assert keys and all(key.arg in (P, P + IN_PROGRESS) or key.arg.startswith(P + "/") for key in keys)


@pytest.mark.skipif(os.geteuid() != 0, reason="the install command chowns the prefix to root")
def test_install_command_runs_from_a_private_folder_removed_afterwards(tmp_path):
    source = tmp_path / "inst.sh"
    source.write_bytes(b'#!/bin/bash\nmkdir -p "$3"\nprintf "%s %s\\n" "$0" "$(stat -c %a:%U "$(dirname "$0")")" >"$3/ran"\n')
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    prefix = str(tmp_path / "opt" / "conda")
    facts = {StateKey("file", prefix): None, StateKey("file", f"{prefix}/{MARKER}"): None, StateKey("df", prefix): 10**8}
    [change] = plan("conda_install", {"installer": str(source), "sha256": sha, "prefix": prefix}, facts)
    uploads = tmp_path / "uploads"  # what provision.engine.uploads sends before the round trip
    uploads.mkdir(mode=0o700)
    for name in (sha, "0" * 64):
        (uploads / name).write_bytes(source.read_bytes())
    env = {**os.environ, "PROVISION_UPLOADS": str(uploads)}
    done = subprocess.run(["sh", "-c", change.command], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    ran, perms = (tmp_path / "opt" / "conda" / "ran").read_text().split()
    assert perms == "700:root" and ran.endswith("/installer.sh") and ran.startswith("/var/tmp/provision-installer.")
    assert not os.path.exists(os.path.dirname(ran))  # removed afterwards
    assert (tmp_path / "opt" / "conda" / MARKER).read_text() == f"sha256:{sha}\n"
    assert not os.path.exists(prefix + IN_PROGRESS)
    # a wrong checksum on the node: nothing run, the folder removed too
    bad = change.command.replace(sha, "0" * 64)
    before = set(os.listdir("/var/tmp"))
    failed = subprocess.run(["sh", "-c", bad.replace(prefix, prefix + "2")], capture_output=True, text=True, env=env)
    assert failed.returncode == 1 and "mismatch" in failed.stderr
    assert set(os.listdir("/var/tmp")) == before and not os.path.exists(prefix + "2")


def test_relative_installer_is_read_from_base_dir_and_md5_accepted(installer):
    path, _sha, md5 = installer
    changes = plan(
        "conda_install",
        {"installer": path.name, "md5": md5, "prefix": P, "base_dir": str(path.parent)},
        {PREFIX: None, MARK: None, DF: 10**8},
    )
    assert "md5sum" in changes[-1].command


def test_same_install_is_skipped(installer):
    path, sha, _md5 = installer
    facts = {PREFIX: FileState("d"), MARK: stamp(f"sha256:{sha}\n".encode()), DF: 0}
    assert plan("conda_install", {"installer": str(path), "sha256": sha, "prefix": P}, facts) == []


def test_prefix_holding_something_else_is_refused(installer):
    path, sha, _md5 = installer
    with pytest.raises(OperationError, match="already exists and holds an install provision did not make"):
        plan(
            "conda_install", {"installer": str(path), "sha256": sha, "prefix": P}, {PREFIX: FileState("d"), MARK: None, DF: 10**8}
        )
    with pytest.raises(OperationError, match="holds sha256:0000"):
        plan(
            "conda_install",
            {"installer": str(path), "sha256": sha, "prefix": P},
            {PREFIX: FileState("d"), MARK: stamp(b"sha256:" + b"0" * 64 + b"\n"), DF: 10**8},
        )


def test_free_space_checked_first(installer):
    path, sha, _md5 = installer
    with pytest.raises(OperationError, match=r"not enough free disk space for /opt/anaconda3: 10 MiB free .* 6000 MiB needed"):
        plan(
            "conda_install",
            {"installer": str(path), "sha256": sha, "prefix": P, "min_free_mb": 6000},
            {PREFIX: None, MARK: None, DF: 10 * 1024},
        )


def test_url_installer_is_checked_on_the_node():
    sha = "a" * 64
    [change] = plan(
        "conda_install",
        {"installer": "https://repo.example.org/A.sh", "sha256": sha, "prefix": P},
        {PREFIX: None, MARK: None, DF: 10**8},
    )
    assert 'curl -fsSL -o "$d/installer.sh" https://repo.example.org/A.sh' in change.command
    assert change.command.index("mktemp -d") < change.command.index("curl") < change.command.index("got=")
    assert change.command.index("got=") < change.command.index('bash "$d/installer.sh"')


@pytest.mark.parametrize(
    "args,message",
    [
        ({"sha256": "0" * 64}, "sha256 is [0-9a-f]{64}, expected 0{64} \\(wrong or damaged file\\)"),
        ({}, "a checksum is required"),
        ({"sha256": "xyz"}, "is not a sha256 digest"),
        ({"installer": "/nonexistent/Anaconda.sh", "sha256": "0" * 64}, "No such file or directory"),
        ({"prefix": "/"}, "must be an absolute folder below /"),
        ({"installer": "https://x/a b.sh", "sha256": "0" * 64}, "not an http"),
        ({"prefix": "/opt/$(touch /tmp/x)"}, r"anaconda prefix '/opt/\$\(touch /tmp/x\)' may only hold"),
        ({"prefix": "/opt/a`id`"}, "may only hold"),
        ({"prefix": '/opt/a"b'}, "may only hold"),
        ({"prefix": "/opt/a b"}, "may only hold"),
        ({"prefix": "/opt/a'b"}, "may only hold"),
        ({"channels": ["defaults", "x\n  - evil"]}, r"conda channel 'x\\x0a  - evil' may only hold"),
        ({"channels": ["a b"]}, "may only hold"),
        ({"channels": "defaults"}, "channels"),
    ],
)
def test_bad_input_before_any_host(installer, args, message):
    path, sha, _md5 = installer
    full = {"installer": str(path), "prefix": P, **args}
    operation = OPERATIONS["conda_install"]
    with pytest.raises(ArgumentError, match=message):
        operation.requests(operation.check_args(full))


def test_clones_per_prefix_skipped_when_present():
    args = {"user": "alice", "prefixes": ["/opt/anaconda2", "/opt/anaconda3/"]}
    facts = {
        StateKey("file", "~alice/.conda/envs/anaconda2/conda-meta"): FileState("d"),
        StateKey("file", "~alice/.conda/envs/anaconda3/conda-meta"): None,
    }
    [change] = plan("conda_clone", args, facts)
    assert change.command == (
        'umask 022 && mkdir -p "${H_616c696365}"/.conda/envs && /opt/anaconda3/bin/conda create -q -y '
        '-p "${H_616c696365}"/.conda/envs/anaconda3 --clone /opt/anaconda3 >/dev/null'
    )


def test_clone_prefix_checked_like_the_install_prefix():
    with pytest.raises(ArgumentError, match="may only hold"):
        plan("conda_clone", {"user": "alice", "prefixes": ["/opt/x;id"]}, {})


def test_block_top_goes_before_the_early_return_and_is_replaced_in_place():
    bashrc = "# System-wide .bashrc\n[ -z \"$PS1\" ] && return\nPS1='x'\n"
    once = edit_block_top(bashrc, ". /etc/profile.d/provision-conda.sh", "# {mark} conda")
    assert once.splitlines()[:3] == ["# BEGIN conda", ". /etc/profile.d/provision-conda.sh", "# END conda"]
    assert once.endswith(bashrc)
    assert edit_block_top(once, ". /etc/profile.d/provision-conda.sh", "# {mark} conda") == once
    again = edit_block_top(once, ". /other", "# {mark} conda")
    assert again.splitlines()[1] == ". /other" and again.count("BEGIN conda") == 1


def test_an_interrupted_install_of_ours_is_redone(installer):
    """Issue 15: a prefix left by an install cut off (its in-progress mark beside it, no marker
    inside) is removed and installed again; without the mark it is someone else's: refused."""
    path, sha, _md5 = installer
    args = {"installer": str(path), "sha256": sha, "prefix": P, "timeout": 60}
    [change] = plan(
        "conda_install", args, {PREFIX: FileState("d"), MARK: None, BUSY: stamp(b"sha256:" + b"1" * 64 + b"\n"), DF: 10**8}
    )
    assert "again: an earlier install was interrupted" in change.describe and change.timeout == 60 + AFTER_INSTALL
    command = change.command
    mark = f"printf '%s\\n' sha256:{sha} >/opt/anaconda3{IN_PROGRESS}"
    assert command.index(f"if [ -e /opt/anaconda3{IN_PROGRESS} ]; then rm -rf -- /opt/anaconda3; fi") < command.index(mark)
    assert command.index(mark) < command.index('bash "$d/installer.sh"') < command.index(f"rm -f -- /opt/anaconda3{IN_PROGRESS}")
    assert dict(change.effects)[BUSY] is None
    # no prefix, a stale mark: installed (the mark is rewritten and removed at the end)
    assert plan("conda_install", args, {PREFIX: None, MARK: None, BUSY: stamp(b"x\n"), DF: 10**8})
    with pytest.raises(OperationError, match="refusing to install over it"):
        plan("conda_install", args, {PREFIX: FileState("d"), MARK: None, BUSY: None, DF: 10**8})


def test_installer_checksum_read_in_chunks_never_whole(installer, monkeypatch):
    """A large installer (Anaconda's are 1 GB) is hashed in 1 MiB reads, once per run."""
    import provision.operations.conda as conda

    path, sha, _md5 = installer
    path.write_bytes(b"x" * (3 << 20))
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    sizes = []
    real_open = type(path).open

    def spying_open(self, *a, **k):
        handle = real_open(self, *a, **k)
        read = handle.read
        handle_read = lambda n=-1: (sizes.append(n), read(n))[1]  # noqa: E731
        return type(
            "H", (), {"read": staticmethod(handle_read), "__enter__": lambda s: s, "__exit__": lambda s, *e: handle.close()}
        )()

    monkeypatch.setattr(type(path), "open", spying_open)
    conda._DIGESTS.clear()
    assert conda.verify_local({"installer": str(path), "sha256": sha}) == (3 << 20, sha)
    assert sizes and all(n == 1 << 20 for n in sizes)
    conda.verify_local({"installer": str(path), "sha256": sha})
    assert len(sizes) == 4  # three chunks and the end, read once


def test_an_installer_that_is_a_fifo_or_a_device_is_refused(tmp_path):
    """A FIFO's open waited for a writer (the run hung); /dev/zero was hashed without end. In a
    child process with a generous bound, so that a hang fails this test, not the suite."""
    fifo = tmp_path / "Anaconda.sh"
    os.mkfifo(fifo)
    code = (
        "import sys\nfrom provision.operations.conda import verify_local\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n        verify_local({'installer': path, 'sha256': '0' * 64})\n"
        "    except Exception as error:\n        print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(fifo), "/dev/zero"], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == [
        f"anaconda installer {fifo}: not a regular file",
        "anaconda installer /dev/zero: not a regular file",
    ], done


def test_marker_content_from_the_node_is_shown_printable_and_short(installer):
    path, sha, _md5 = installer
    with pytest.raises(OperationError) as raised:
        plan(
            "conda_install",
            {"installer": str(path), "sha256": sha, "prefix": P},
            {PREFIX: FileState("d"), MARK: stamp(b"\x1b[2J\x1b]0;owned\x07" + b"x" * 5000), DF: 10**8},
        )
    assert "\x1b" not in str(raised.value) and "\x07" not in str(raised.value) and len(str(raised.value)) < 600


def test_clone_and_prefix_through_a_link_refused(installer):
    link = FileState("l", 0o777, "alice", "alice")
    clone = OPERATIONS["conda_clone"]
    key = StateKey("file", "~alice/.conda/envs/anaconda3/conda-meta")
    with pytest.raises(OperationError, match=r"^~alice/.conda/envs/anaconda3/conda-meta is a symbolic link"):
        clone.decide(clone.check_args({"user": "alice", "prefixes": [P]}), {key: link})
    path, sha, _md5 = installer
    install = OPERATIONS["conda_install"]
    args = install.check_args({"installer": str(path), "sha256": sha, "prefix": P})
    with pytest.raises(OperationError, match=r"^/opt/anaconda3 is below a folder another user can write"):
        install.decide(args, {PREFIX: FileState("u", 0o777, "bob", "bob", below="/opt"), MARK: None, DF: None})
