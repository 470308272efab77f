"""The cluster's one MUNGE key: made once on the controller (the machine running provision), given
to every Slurm host as ``/etc/munge/munge.key`` (0400, owned by munge), never shown.

- The controller keeps the key in a file beside the inventory (``secrets/munge.key`` unless
  ``slurm.munge_key`` names another), as it keeps the Jupyter password files. When the default
  file is missing, it is made before any command runs on a host: 128 random bytes (``mungekey``'s
  default length: dun/munge 9317fe8a7efe, src/libcommon/munge_defs.h:219
  ``MUNGE_KEY_LEN_DFL_BYTES 128``) from the
  operating system's generator, written mode 0400 in a folder of its own (0700) under a fresh
  name and linked into place, so two runs at once agree on one key. A file the user named must
  exist already (a missing one is a typo, not a wish for a new key).
- A key file is refused, naming it, before any command runs on a host when its mode is not 0400, when
  it is not a regular file reached without a link, or when it cannot be a MUNGE key: munged
  refuses a key shorter than 32 bytes (src/munged/conf.c:664-666, "Keyfile must be at least %d
  bytes", ``MUNGE_KEY_LEN_MIN_BYTES``, munge_defs.h:229) and ``mungekey`` writes none longer
  than 1024 (munge_defs.h:224 ``MUNGE_KEY_LEN_MAX_BYTES``, "the maximum length (in bytes) of a
  key"); text that is a PEM or OpenSSH key is some other key.
- On the node the key is a secret file: compared by checksum, written only when it differs
  (atomically; the old one kept 0400 as ``munge.key.provision~``), never in ``--diff``, ``-v``,
  ``--json`` or a log. It is read and written **as munge** (the task's ``become_user``):
  ``/etc/munge`` is munge's own folder, where root does not act. munged reads its key when it
  starts: the role restarts munge when this task changed the file.

>>> munge_key_problem(b"short", 0o100400)
'is 5 bytes: a MUNGE key has at least 32 (munged refuses a shorter one)'
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provision.errors import ArgumentError, UnsafeFileError
from provision.files import private_dir, read_regular
from provision.inventory.model import check_user
from provision.operations.base import Arg, Operation, StateKey, Write, check_path
from provision.operations.files import content_changes

DEFAULT_KEY_FILE = "secrets/munge.key"  # beside the inventory, as the Jupyter password files are
KEY_BYTES = 128  # mungekey's default length (MUNGE_KEY_LEN_DFL_BYTES)
MIN_BYTES = 32  # munged: "Keyfile must be at least %d bytes" (MUNGE_KEY_LEN_MIN_BYTES)
MAX_BYTES = 1024  # the longest key mungekey writes (MUNGE_KEY_LEN_MAX_BYTES)
_OTHER_KEYS = (b"-----BEGIN ", b"ssh-", b"ecdsa-sha2-")  # PEM/OpenSSH private or public keys


class MungeKeyError(ArgumentError):
    """The controller's MUNGE key file is missing, unsafe or not a MUNGE key (bad input)."""


def munge_key_problem(data: bytes, mode: int) -> str | None:
    """Why a file with these bytes and this ``st_mode`` is not a usable MUNGE key, or None."""
    if mode & 0o7777 != 0o400:
        return f"mode {mode & 0o7777:04o}, not 0400 (chmod 0400 it: munged refuses a key others can read)"
    if len(data) < MIN_BYTES:
        return f"is {len(data)} bytes: a MUNGE key has at least {MIN_BYTES} (munged refuses a shorter one)"
    if len(data) > MAX_BYTES:
        return f"is {len(data)} bytes: a MUNGE key has at most {MAX_BYTES} (mungekey's largest); is it the right file?"
    if data.lstrip().startswith(_OTHER_KEYS):
        return "holds a PEM or OpenSSH key, not a MUNGE key (make one with mungekey, or let provision make it)"
    return None


def key_path(key_file: str | None, base_dir: str | None) -> tuple[Path, bool]:
    """The controller file of the key (relative to ``base_dir``, the inventory's folder) and
    whether it is the default one (made when missing)."""
    chosen = key_file or DEFAULT_KEY_FILE
    path = Path(chosen).expanduser()
    if not path.is_absolute():
        path = Path(base_dir or ".") / path
    return path, not key_file or key_file == DEFAULT_KEY_FILE


def _make_key(path: Path) -> None:
    """Write a new key at ``path`` unless one is there: a fresh name in the same private folder,
    then a hard link to ``path`` (fails when another run linked one first; that key is kept)."""
    folder = private_dir(path.parent, mode=0o700)
    fresh = f".{path.name}.{secrets.token_hex(6)}"
    try:
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o400, dir_fd=folder)
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):
            os.link(fresh, path.name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
        os.fsync(folder)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(fresh, dir_fd=folder)
        os.close(folder)


def controller_key(key_file: str | None, base_dir: str | None) -> bytes:
    """The cluster's key from the controller file (made first when it is the default one and
    missing); :class:`MungeKeyError` naming the file, never its content, when it cannot be used."""
    path, default = key_path(key_file, base_dir)
    if default and not os.path.lexists(path):
        try:
            _make_key(path)
        except (OSError, UnsafeFileError) as error:
            raise MungeKeyError(f"munge key {path}: cannot make it: {getattr(error, 'strerror', None) or error}") from None
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
            raise MungeKeyError(f"munge key {path}: not a regular file (a link or a folder): refused")
        data = read_regular(path, limit=64 * 1024)
    except FileNotFoundError:
        raise MungeKeyError(f"munge key {path}: no such file (give an existing key, or leave slurm.munge_key unset)") from None
    except UnsafeFileError as error:
        raise MungeKeyError(f"munge key {error}") from None
    except OSError as error:
        raise MungeKeyError(f"munge key {path}: {error.strerror or error}") from None
    problem = munge_key_problem(data, info.st_mode)
    if problem:
        raise MungeKeyError(f"munge key {path}: {problem}")
    return data


def _key(args: dict) -> StateKey:
    """The node's key file, read as its owner: /etc/munge is munge's folder, where root does not
    act (a path below a folder another user can write); the task runs as munge (become_user)."""
    return StateKey("file", check_path(args["path"]), check_user(args["owner"], "owner"))


def _requests(args: dict) -> list[StateKey]:
    controller_key(args["key_file"], args["base_dir"])  # bad input before any command runs on a host
    return [_key(args)]


def plan_munge_key(args: dict, current: Mapping[StateKey, Any]) -> list:
    """The key written where the node's file differs from it (by checksum) or its owner or mode
    do; secret: --diff and -v show neither side."""
    key = controller_key(args["key_file"], args["base_dir"])
    attrs = {"owner": args["owner"], "group": args["owner"], "mode": 0o400}
    changes = content_changes(check_path(args["path"]), key, attrs, current.get(_key(args)), secret=True)
    digest = hashlib.sha256(key).hexdigest()[:8]
    # what the change says: the key's fingerprint (enough to see one key everywhere, nothing to guess it from)
    describe = f"install the cluster's munge key (sha256 {digest}...)"
    return [dataclasses.replace(c, describe=describe) if isinstance(c, Write) else c for c in changes]


OPERATIONS = {
    "munge_key": Operation(
        "munge_key",
        {
            "key_file": Arg((str,), help=f"controller file of the key (default {DEFAULT_KEY_FILE}, made once when missing)"),
            "base_dir": Arg((str,), help="folder a relative key_file is read from (the inventory's)"),
            "path": Arg((str,), default="/etc/munge/munge.key", help="the key on the node"),
            "owner": Arg((str,), default="munge", help="user (and group) munged runs as"),
        },
        _requests,
        plan_munge_key,
        doc="the cluster's MUNGE key, made once on the controller, 0400 on every node, never shown",
    ),
}
