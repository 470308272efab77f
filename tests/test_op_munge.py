"""The munge_key operation (provision/operations/munge.py): the controller's key made once or
checked, its changes on a node, and that no output shows it."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest

from provision.engine.task import unified_diff
from provision.engine.verbosity import ran_text
from provision.operations import OPERATIONS
from provision.operations.base import FileState, Run, StateKey, Write
from provision.operations.munge import MungeKeyError, controller_key, munge_key_problem

OP = OPERATIONS["munge_key"]
NODE_KEY = StateKey("file", "/etc/munge/munge.key", "munge")  # read as munge: /etc/munge is munge's folder


def _args(tmp_path, key_file=None):
    return OP.check_args({"key_file": key_file, "base_dir": str(tmp_path)})


def _user_key(tmp_path, data: bytes, mode: int = 0o400, name: str = "site.key"):
    path = tmp_path / name
    path.write_bytes(data)
    path.chmod(mode)
    return name


def test_the_default_key_is_made_once_128_random_bytes_0400_in_a_private_folder(tmp_path):
    key = controller_key(None, str(tmp_path))
    path = tmp_path / "secrets" / "munge.key"
    assert len(key) == 128 and path.read_bytes() == key
    assert (path.stat().st_mode & 0o7777, path.parent.stat().st_mode & 0o777) == (0o400, 0o700)
    assert controller_key(None, str(tmp_path)) == key  # kept: never made again
    assert controller_key("secrets/munge.key", str(tmp_path)) == key  # the default, named
    assert os.listdir(path.parent) == ["munge.key"]  # no temporary file left


def test_runs_at_once_agree_on_one_key(tmp_path):
    keys: list[bytes] = []
    threads = [threading.Thread(target=lambda: keys.append(controller_key(None, str(tmp_path)))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 8 and len(set(keys)) == 1


@pytest.mark.parametrize(
    "data, mode, problem",
    [
        (b"k" * 128, 0o600, "mode 0600, not 0400"),
        (b"k" * 128, 0o440, "mode 0440, not 0400"),
        (b"k" * 31, 0o400, "is 31 bytes: a MUNGE key has at least 32 (munged refuses a shorter one)"),
        (b"", 0o400, "is 0 bytes"),
        (b"k" * 1025, 0o400, "is 1025 bytes: a MUNGE key has at most 1024"),
        (b"-----BEGIN OPENSSH PRIVATE KEY-----\n" + b"A" * 200, 0o400, "holds a PEM or OpenSSH key, not a MUNGE key"),
        (b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGv0 someone@somewhere\n", 0o400, "holds a PEM or OpenSSH key"),
    ],
)
def test_a_key_the_user_gives_must_be_0400_and_a_munge_key(tmp_path, data, mode, problem):
    name = _user_key(tmp_path, data, mode)
    with pytest.raises(MungeKeyError) as refused:
        controller_key(name, str(tmp_path))
    message = str(refused.value)
    assert message.startswith(f"munge key {tmp_path / name}: ") and problem in message, message
    assert "\n" not in message and (not data or data[:40].decode(errors="ignore") not in message)  # one line, no content


def test_a_munge_key_of_32_to_1024_bytes_at_0400_is_taken(tmp_path):
    for size in (32, 1024):
        name = _user_key(tmp_path, os.urandom(size), name=f"k{size}")
        assert len(controller_key(name, str(tmp_path))) == size
    assert munge_key_problem(b"x" * 128, 0o100400) is None


def test_a_key_file_the_user_names_is_never_made_and_never_read_through_a_link(tmp_path):
    with pytest.raises(MungeKeyError, match=r"munge key .*/missing.key: no such file"):
        controller_key("missing.key", str(tmp_path))
    assert not (tmp_path / "missing.key").exists()
    real = _user_key(tmp_path, os.urandom(128))
    (tmp_path / "link.key").symlink_to(tmp_path / real)
    with pytest.raises(MungeKeyError, match="not a regular file"):
        controller_key("link.key", str(tmp_path))
    (tmp_path / "folder.key").mkdir()
    with pytest.raises(MungeKeyError, match="not a regular file"):
        controller_key("folder.key", str(tmp_path))


def test_a_bad_key_is_refused_when_the_task_is_checked_before_any_host(tmp_path):
    name = _user_key(tmp_path, b"k" * 128, 0o644)
    with pytest.raises(MungeKeyError, match="mode 0644, not 0400"):
        OP.requests(_args(tmp_path, name))


def test_the_key_is_read_and_written_as_munge_owned_0400_and_secret(tmp_path):
    args = _args(tmp_path)
    assert OP.requests(args) == [NODE_KEY]
    key = controller_key(None, str(tmp_path))
    (write,) = OP.decide(args, {NODE_KEY: None})
    assert isinstance(write, Write) and write.path == "/etc/munge/munge.key" and write.content == key
    assert (write.owner, write.group, write.mode, write.secret) == ("munge", "munge", 0o400, True)
    digest = hashlib.sha256(key).hexdigest()
    assert write.describe == f"install the cluster's munge key (sha256 {digest[:8]}...)"
    # what --diff and -v show: neither side of the file
    old = FileState("f", 0o600, "munge", "munge", hashlib.sha256(b"o" * 128).hexdigest(), b"o" * 128)
    (replace,) = OP.decide(args, {NODE_KEY: old})
    assert replace.old == b"o" * 128
    shown = unified_diff(replace, "sn1") + ran_text(replace)
    assert "(content hidden: secret)" in shown and key.hex() not in shown and "o" * 20 not in shown
    assert key.decode("latin-1") not in shown


def test_a_node_with_the_key_changes_nothing_and_a_wider_mode_is_narrowed(tmp_path):
    args = _args(tmp_path)
    key = controller_key(None, str(tmp_path))
    same = FileState("f", 0o400, "munge", "munge", hashlib.sha256(key).hexdigest(), key)
    assert OP.decide(args, {NODE_KEY: same}) == []
    wide = FileState("f", 0o644, "munge", "munge", hashlib.sha256(key).hexdigest(), key)
    (fix,) = OP.decide(args, {NODE_KEY: wide})
    assert isinstance(fix, Run) and fix.command == "chmod 0400 /etc/munge/munge.key"
