"""Files on the controller, where a folder may be someone else's: never through a link.

A capture folder, a replay directory, a facts folder or an output path may sit below a folder
another user can write (``/tmp``, a shared project folder). Everything here therefore works on
open folder descriptors: a name is opened with ``O_NOFOLLOW`` relative to its folder, a file is
read only when it is a regular file (``fstat``, never a FIFO or a device, ``O_NONBLOCK`` so a FIFO
planted in its place cannot block the open) and no larger than a cap, and a file is written as a
new temporary file (``O_EXCL``, mode 0600) renamed over its name: a rename replaces a planted link,
it never writes through it.

Durability costs one sync per batch (:class:`StagedFiles`): every new file is written, the
filesystem is synced once (``syncfs(2)``; a batch of one or two files fsyncs them instead), then
each file is renamed into place, then the folders are synced once more. A crash leaves each name
holding either its whole old content or its whole new content, never a half-written file: the
rename only happens after the data is on disk.

Folders provision keeps its own files in (a facts folder) follow OpenSSH's StrictModes rule
(``safe_path`` in openssh-portable misc.c): owned by you or by root, writable by no one else.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "facts"
    >>> with StagedFiles() as staged:
    ...     fd = private_dir(folder)
    ...     staged.add(fd, "a.txt", b"hello")
    >>> read_regular(folder / "a.txt")
    b'hello'
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from provision.errors import ArgumentError, UnsafeFileError
from provision.text import shown as visible, shown_value

# A capture, a facts file, a rank file: megabytes at most on the largest machine (lstopo's XML of
# a 8-GPU, 10-NIC EPYC server is 0.4 MB). A node's whole output is capped at the same size
# (provision.transport.channel.MAX_OUTPUT).
READ_LIMIT = 64 * 1024 * 1024
_FSYNC_AT_MOST = 2  # files a batch fsyncs one by one; above, one syncfs(2) for all
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _refuse(path: object, why: str) -> UnsafeFileError:
    return UnsafeFileError(f"{path}: {why}: refused (provision never reads or writes through a link or a special file)")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _open(name: str | Path, flags: int, dir_fd: int | None, shown: object) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):  # ELOOP: the last part is a link; ENOTDIR: a link or file, not a folder
            try:
                kind = "a link" if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode) else "not a folder"
            except OSError:
                kind = "a link or not a folder"
            raise _refuse(shown, f"is {kind}") from None
        raise


def read_regular(
    path: str | Path, *, dir_fd: int | None = None, limit: int = READ_LIMIT, owners: tuple[int, ...] = (), shown: object = None
) -> bytes:
    """The bytes of ``path`` (relative to ``dir_fd`` when given), if it is a regular file reached
    without following a link in its last part, at most ``limit`` bytes long, and (``owners``
    given) owned by one of those uids; else :class:`UnsafeFileError` (too large, a link, a FIFO, a
    device, a folder, someone else's file) naming ``shown`` (default: ``path``). A hard link to
    another user's file is caught by ``owners``. OSError for a missing file."""
    shown = path if shown is None else shown
    fd = _open(path, _OPEN_READ, dir_fd, shown)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(shown, f"is {_kind(info.st_mode)}")
        if owners and info.st_uid not in owners:
            raise UnsafeFileError(f"{shown}: owned by uid {info.st_uid}, not by its folder's owner: refused (a hard link?)")
        too_large = UnsafeFileError(f"{shown}: more than the {limit // 1024} KiB it may hold: refused")
        if info.st_size > limit:
            raise too_large
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # grew while read
                raise too_large
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_input_text(path: str | Path, *, what: str, limit: int, error: type[ArgumentError] = ArgumentError) -> str:
    """The UTF-8 text of a controller file a user named (a key file, a password file), read as
    :func:`read_regular` reads (never through a link, never a FIFO, ``limit`` bytes at most); any
    failure is one ``error`` naming ``what`` and the file, never its content.

    >>> read_input_text("/nonexistent", what="ssh_keys_file", limit=10)
    Traceback (most recent call last):
    provision.errors.ArgumentError: ssh_keys_file /nonexistent: No such file or directory
    """
    shown = visible(str(path), newlines=False)  # a path's control characters made visible: one line
    try:
        return read_regular(path, limit=limit, shown=shown).decode()
    except UnsafeFileError as problem:
        raise error(f"{what} {problem}") from None
    except OSError as problem:
        raise error(f"{what} {shown}: {problem.strerror or problem}") from None
    except UnicodeDecodeError:
        raise error(f"{what} {shown}: not UTF-8 text") from None


def open_dir(path: str | Path, *, dir_fd: int | None = None) -> int:
    """A descriptor of the folder ``path`` (its last part never a link); the caller closes it."""
    return _open(path, _OPEN_DIR, dir_fd, path)


def check_private(fd: int, shown: object) -> os.stat_result:
    """Raise :class:`UnsafeFileError` unless the folder ``fd`` is owned by this user or root and
    writable by no one else (OpenSSH StrictModes); its stat."""
    info = os.fstat(fd)
    if info.st_uid not in (os.geteuid(), 0):
        raise UnsafeFileError(f"{shown}: owned by uid {info.st_uid}, not by you: refused (choose a folder of your own)")
    if info.st_mode & 0o022:
        writers = " and ".join(who for who, bit in (("its group", 0o020), ("others", 0o002)) if info.st_mode & bit)
        raise UnsafeFileError(
            f"{shown}: writable by {writers} "
            f"(mode {info.st_mode & 0o7777:04o}): refused (chmod go-w {shown}, or choose a private folder)"
        )
    return info


def private_dir(path: str | Path, *, dir_fd: int | None = None, mode: int = 0o700, shown: object = None) -> int:
    """Open the folder ``path`` for provision's own files, making it (``mode``) when missing, and
    check it (:func:`check_private`); parents of a new top-level folder are made as usual.
    Errors name ``shown`` (default: ``path``). Returns an open descriptor; the caller closes it."""
    shown = path if shown is None else shown
    if dir_fd is None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, mode, dir_fd=dir_fd)
    fd = _open(path, _OPEN_DIR, dir_fd, shown)
    try:
        check_private(fd, shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _syncfs(fd: int) -> bool:
    """``syncfs(2)`` on the filesystem of ``fd``; False where the C library has none."""
    import ctypes  # only where files are saved

    libc = ctypes.CDLL(None, use_errno=True)
    call = getattr(libc, "syncfs", None)
    if call is None:
        return False
    if call(fd) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
    return True


class StagedFiles:
    """New contents written now, put in place together at the end of the ``with`` block, with one
    sync of the filesystem before the renames and one after (see the module's docstring).

    Inside the block, :meth:`add` writes a temporary file beside its name; :meth:`remove` marks a
    name to delete. On an error nothing is renamed and the temporary files go.
    """

    def __init__(self) -> None:
        self._staged: list[tuple[int, str, str]] = []  # (folder fd, temporary name, name)
        self._removed: list[tuple[int, str]] = []
        self._fds: list[int] = []

    def add(self, dir_fd: int, name: str, data: bytes, mode: int = 0o600) -> None:
        """Write ``data`` to a new temporary file in ``dir_fd`` (renamed to ``name`` at the end)."""
        if "/" in name or name in ("", ".", ".."):
            raise UnsafeFileError(f"{shown_value(name)} is not a file name")
        temporary = f".{name}.{secrets.token_hex(6)}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        self._staged.append((dir_fd, temporary, name))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)  # whatever the umask
        finally:
            os.close(fd)

    def remove(self, dir_fd: int, name: str) -> None:
        """Delete ``name`` from ``dir_fd`` at the end (unlink: a link goes, never its target)."""
        self._removed.append((dir_fd, name))

    def mark(self) -> tuple[int, int]:
        """A point to :meth:`discard` back to (what was added after it)."""
        return len(self._staged), len(self._removed)

    def discard(self, mark: tuple[int, int]) -> None:
        """Forget what was added after ``mark``: its temporary files go now."""
        staged, removed = mark
        for dir_fd, temporary, _ in self._staged[staged:]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=dir_fd)
        del self._staged[staged:], self._removed[removed:]

    def keep_open(self, fd: int) -> int:
        """Close folder ``fd`` when the block ends; returns it."""
        self._fds.append(fd)
        return fd

    def __enter__(self) -> StagedFiles:
        return self

    def __exit__(self, kind, error, trace) -> None:
        try:
            if kind is None:
                self._commit()
        finally:
            for dir_fd, temporary, _ in self._staged:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary, dir_fd=dir_fd)
            for fd in self._fds:
                os.close(fd)

    def _commit(self) -> None:
        folders = sorted({dir_fd for dir_fd, _, _ in self._staged} | {dir_fd for dir_fd, _ in self._removed})
        # A file or two (a rank file and its backup): fsync each, cheaper than a whole filesystem's sync.
        one_by_one = len(self._staged) <= _FSYNC_AT_MOST
        if self._staged and (one_by_one or not _sync_filesystems(folders)):
            for dir_fd, temporary, _ in self._staged:
                fd = os.open(temporary, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        staged, self._staged = self._staged, []
        for index, (dir_fd, temporary, name) in enumerate(staged):
            try:
                os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                self._staged = staged[index:]  # the rest are removed by __exit__
                raise
        for dir_fd, name in self._removed:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)
        if folders and (one_by_one or not _sync_filesystems(folders)):
            for fd in folders:
                os.fsync(fd)


def _sync_filesystems(folders: list[int]) -> bool:
    """One ``syncfs(2)`` per filesystem holding ``folders``; False where there is no syncfs."""
    by_device = {os.fstat(fd).st_dev: fd for fd in folders}
    return all([_syncfs(fd) for fd in by_device.values()])


def write_atomic(path: Path, text: str, *, backup: bool = True) -> Path | None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, then rename), never
    through a link: a link or special file at ``path`` is refused (:class:`UnsafeFileError`).

    When ``backup`` is true and ``path`` already exists with different content, the old
    file is kept as ``path~`` first (written the same way). Returns the backup's path, or None
    when none was made. A new file gets mode 0644; a replaced one keeps its mode.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = open_dir(path.parent)
    backup_path = None
    try:
        try:
            old = read_regular(path.name, dir_fd=folder)
            mode = os.stat(path.name, dir_fd=folder, follow_symlinks=False).st_mode & 0o7777
        except FileNotFoundError:
            old, mode = None, 0o644
        except UnsafeFileError:
            raise _refuse(path, "is a link or not a regular file") from None
        data = text.encode()
        if old == data and backup:
            return None  # unchanged: no write, no backup churn
        with StagedFiles() as staged:
            if backup and old is not None:
                backup_path = path.with_name(path.name + "~")
                staged.add(folder, backup_path.name, old, mode)
            staged.add(folder, path.name, data, mode)
    finally:
        os.close(folder)
    return backup_path


def unignored_in_git(path: str | Path) -> Path | None:
    """The top of the git work tree that holds ``path`` when git would take the file in (it is
    inside a work tree and no .gitignore rule ignores it: one ``git add -A`` commits it), else
    None (outside any work tree, ignored, or no ``git`` on this machine). For a secret beside an
    inventory: a password file that a commit would publish is said, never silently kept there.
    Git itself answers (``rev-parse``, ``check-ignore``): its ignore rules are not rewritten here."""
    import shutil
    import subprocess

    path = Path(path)
    if shutil.which("git") is None or not path.parent.is_dir():
        return None
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # the tree the file is in, not the caller's
    try:
        top = subprocess.run(
            ["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=10, env=env
        )
        if top.returncode != 0 or not top.stdout.strip():
            return None
        ignored = subprocess.run(
            ["git", "-C", str(path.parent), "check-ignore", "-q", "--", path.name], capture_output=True, timeout=10, env=env
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(top.stdout.strip()) if ignored.returncode == 1 else None
