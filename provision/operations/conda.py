"""Anaconda in a shared prefix (``/opt/anaconda3``) with per-user clones, as the seed does by hand.

- ``conda_install``: an installer from a controller file (checked against its required sha256 or
  md5 on the controller, before any command runs on a host) or from a URL (checked on the node after
  the download), run in batch mode ``bash INSTALLER -b -p PREFIX`` under umask 022 after a
  free-space check; the prefix then belongs to root and nobody else may write to it. A marker
  ``PREFIX/.provision-installer`` holds the installer's checksum: the same install is skipped,
  a prefix that holds anything else is refused (never overwritten), except one an interrupted run
  of ours left (``PREFIX.provision-installing`` beside it), which is installed again. A controller
  installer is sent over SFTP before the round trip (:class:`provision.operations.base.Upload`);
  the installer runs under its own time limit (``timeout``, default 1800 s).
- ``conda_clone``: for each prefix, ``conda create -p ~USER/.conda/envs/NAME --clone PREFIX`` (NAME:
  the prefix's last folder), run as the user
  (``become_user`` in the playbook), skipped when the clone exists.
The playbook puts conda on non-interactive SSH sessions (mpirun) with ``block_top`` (in
:mod:`provision.operations.files`): Debian's /etc/bash.bashrc returns early for them.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from stat import S_ISREG
from typing import Any

from provision.errors import ArgumentError
from provision.operations.base import (
    UNKNOWN,
    Arg,
    FileState,
    Operation,
    OperationError,
    Run,
    StateKey,
    Upload,
    check_path,
    parent_of,
    quote,
    shell_path,
)
from provision.text import printable, shown_value

MARKER = ".provision-installer"
IN_PROGRESS = ".provision-installing"  # PREFIX + this: an install of ours has started and not finished
INSTALL_TIMEOUT = 1800  # seconds the installer may run (the task's ``timeout`` argument)
AFTER_INSTALL = 600  # seconds more its step may take: checksums, chown -R of a large prefix
UPLOAD_DIR = "/var/tmp"  # the installer goes to a private ``mktemp -d`` folder (0700, root) in here
_PREFIX = re.compile(r"^/[A-Za-z0-9._/+-]+\Z")  # written raw-safe into shell profiles and .condarc
_CHANNEL = re.compile(r"^[A-Za-z0-9._:/@+-]+\Z")
_URL = re.compile(r"^(https?|ftp)://[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+\Z")
_HEX = {"sha256": re.compile(r"^[0-9a-f]{64}\Z"), "md5": re.compile(r"^[0-9a-f]{32}\Z")}


def checksum_of(args: dict) -> tuple[str, str]:
    """``(algorithm, hex digest)`` from ``sha256`` or ``md5`` (one is required)."""
    for algorithm in ("sha256", "md5"):
        value = args.get(algorithm)
        if value:
            value = str(value).strip().lower()
            if not _HEX[algorithm].match(value):
                raise ArgumentError(f"anaconda {args['installer']}: {algorithm} {shown_value(value)} is not a {algorithm} digest")
            return algorithm, value
    raise ArgumentError(f"anaconda {args['installer']}: a checksum is required (sha256, or md5 as the archive lists)")


def check_prefix(prefix: Any, what: str = "anaconda prefix") -> str:
    """A prefix that is safe in every login shell's profile: ``/`` then only letters, digits and
    ``._/+-``, normalised; else :class:`ArgumentError` naming the value."""
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise ArgumentError(f"{what} {shown_value(prefix)} may only hold letters, digits and ._/+- after a leading /")
    return check_path(prefix)


def check_channels(channels: Any) -> list[str]:
    """The ``.condarc`` channels: names or URLs of letters, digits and ``._:/@+-``; else
    :class:`ArgumentError` naming the value."""
    if channels is None:
        return []
    if not isinstance(channels, list):
        raise ArgumentError(f"anaconda channels {shown_value(channels)} must be a list")
    for channel in channels:
        if not isinstance(channel, str) or not _CHANNEL.match(channel):
            raise ArgumentError(f"conda channel {shown_value(channel)} may only hold letters, digits and ._:/@+-")
    return channels


def is_url(installer: str) -> bool:
    """Whether the installer is fetched by the node from a URL."""
    return "://" in installer


def local_installer(args: dict) -> Path:
    """The controller file of the installer (relative to ``base_dir``)."""
    path = Path(args["installer"]).expanduser()
    if not path.is_absolute() and args.get("base_dir"):
        path = Path(args["base_dir"]) / path
    return path


_READ_LOCK = threading.Lock()
_DIGESTS: dict[tuple, tuple[int, str, str]] = {}  # (path, size, mtime, algorithm) -> (size, digest, sha256): once per run


def verify_local(args: dict) -> tuple[int, str]:
    """Check the controller installer's checksum, reading it in chunks (an installer of a few GB
    never sits in memory); ``(size, sha256)``. Bad input when missing or wrong."""
    algorithm, digest = checksum_of(args)
    path = local_installer(args)
    try:
        stat = path.stat()
        if not S_ISREG(stat.st_mode):  # a FIFO would hold the run, a device would be hashed without end
            raise ArgumentError(f"anaconda installer {path}: not a regular file")
        key = (str(path), stat.st_size, stat.st_mtime_ns, algorithm)
        with _READ_LOCK:  # hosts plan in parallel threads: each file is hashed once
            if key not in _DIGESTS:
                wanted, sha256 = hashlib.new(algorithm), hashlib.sha256()
                with path.open("rb") as handle:
                    while chunk := handle.read(1 << 20):
                        wanted.update(chunk)
                        sha256.update(chunk)
                if len(_DIGESTS) >= 16:
                    _DIGESTS.clear()
                _DIGESTS[key] = (stat.st_size, wanted.hexdigest(), sha256.hexdigest())
            size, got, sha256_hex = _DIGESTS[key]
    except OSError as error:
        raise ArgumentError(f"anaconda installer {path}: {error.strerror or error}") from None
    if got != digest:
        raise ArgumentError(f"anaconda installer {path}: {algorithm} is {got}, expected {digest} (wrong or damaged file)")
    return size, sha256_hex


def _install_requests(args: dict) -> list[StateKey]:
    prefix = check_path(args["prefix"])
    if prefix.startswith("~") or prefix.count("/") < 2:
        raise ArgumentError(f"anaconda prefix {shown_value(prefix)} must be an absolute folder below / (e.g. /opt/anaconda3)")
    prefix = check_prefix(args["prefix"])
    check_channels(args.get("channels"))
    if args.get("path_form", "profile") not in ("profile", "module"):
        raise ArgumentError(f"conda_path must be profile or module, not {printable(str(args['path_form']), 40)}")
    if is_url(args["installer"]):
        checksum_of(args)
        if not _URL.match(args["installer"]):
            raise ArgumentError(f"anaconda installer {shown_value(args['installer'])} is not an http(s)/ftp URL")
    else:
        verify_local(args)  # before any command runs on a host
    return [
        StateKey("file", prefix),
        StateKey("file", f"{prefix}/{MARKER}"),
        StateKey("file", prefix + IN_PROGRESS),
        StateKey("df", prefix),
    ]


def _size_needed_kib(args: dict, installer_bytes: int) -> int:
    if args["min_free_mb"]:
        return int(args["min_free_mb"]) * 1024
    return max(3 * installer_bytes // 1024, 64 * 1024)  # an installer unpacks to ~3x its size


def plan_install(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Send (SFTP) or download the installer into a private ``mktemp -d`` folder, check it, run
    it in batch mode under its own time limit, remove the folder, lock the prefix down; or nothing.

    An install is marked in progress (``PREFIX.provision-installing`` beside the prefix, written
    before the installer starts and removed after the marker): a prefix an interrupted run left
    (a step time limit, a lost connection, a reboot) is recognised as ours and installed again;
    a prefix without either marker is someone else's and is refused."""
    prefix = check_prefix(args["prefix"])
    algorithm, digest = checksum_of(args)
    stamp = f"{algorithm}:{digest}\n".encode()
    marker = current.get(StateKey("file", f"{prefix}/{MARKER}"))
    if marker is not None and marker.content == stamp:
        return []
    interrupted = current.get(StateKey("file", prefix + IN_PROGRESS)) is not None
    if current.get(StateKey("file", prefix)) is not None and not interrupted:
        held = (
            printable(marker.content.decode(errors="replace"), 120)
            if marker and marker.content
            else "an install provision did not make"
        )
        raise OperationError(
            f"{prefix} already exists and holds {held}; refusing to install over it (remove it, or choose another prefix)"
        )
    local = None if is_url(args["installer"]) else verify_local(args)
    needed = _size_needed_kib(args, local[0] if local is not None else 0)
    free = current.get(StateKey("df", prefix))
    if free is not None and free < needed:
        raise OperationError(
            f"not enough free disk space for {prefix}: {free // 1024} MiB free on its filesystem, "
            f"{needed // 1024} MiB needed (set min_free_mb to change the estimate)"
        )
    tool = "sha256sum" if algorithm == "sha256" else "md5sum"
    uploads: tuple[Upload, ...] = ()
    if local is None:
        url = quote(args["installer"])
        fetch = (
            f'{{ if command -v curl >/dev/null; then curl -fsSL -o "$d/installer.sh" {url}; '
            f'else wget -q -O "$d/installer.sh" {url}; fi; }} '
            "|| { echo 'download failed' >&2; exit 1; }"
        )
    else:  # sent over SFTP before this round trip (provision.engine.uploads), linked into root's folder
        size, sha256 = local
        uploads = (Upload(str(local_installer(args)), sha256, size),)
        fetch = (
            # a hard link (one upload serves every prefix of this installer), a copy across filesystems
            f'{{ [ -n "$PROVISION_UPLOADS" ] && {{ ln -- "$PROVISION_UPLOADS/{sha256}" "$d/installer.sh" 2>/dev/null '
            f'|| cp -- "$PROVISION_UPLOADS/{sha256}" "$d/installer.sh"; }}; }} '
            "|| { echo 'the installer was not uploaded' >&2; exit 1; }; "
            f'chown 0:0 "$d/installer.sh" && chmod 600 "$d/installer.sh" && '
            f'{{ [ "$(sha256sum <"$d/installer.sh" | cut -d" " -f1)" = {sha256} ] '
            "|| { echo 'installer sha256 mismatch on the node after the upload' >&2; exit 1; }; }"
        )
    word, progress = shell_path(prefix), shell_path(prefix + IN_PROGRESS)
    limit = int(args["timeout"] or INSTALL_TIMEOUT)
    if limit < 1:
        raise ArgumentError(f"anaconda {prefix}: timeout must be at least 1 second, not {limit}")
    script = " && ".join(
        [
            "umask 022",
            fetch,
            f"got=$({tool} <\"$d/installer.sh\" | cut -d' ' -f1)",
            f'{{ [ "$got" = {digest} ] || {{ echo "installer {algorithm} mismatch on the node: got $got" >&2; exit 1; }}; }}',
            f"mkdir -p {shell_path(parent_of(prefix))}",
            # an interrupted install of ours (its in-progress mark still there): removed, then redone
            f"{{ if [ -e {progress} ]; then rm -rf -- {word}; fi; }}",
            f"printf '%s\\n' {quote(stamp.decode().strip())} >{progress}",
            # its own time limit, inside this step so that the folder is removed after a cut-off too
            f'{{ timeout -k 10 {limit} bash "$d/installer.sh" -b -p {word} >/dev/null; r=$?; [ $r -eq 0 ] || '
            f"{{ [ $r -ne 124 ] || echo 'installer stopped after {limit}s (its timeout); the next run installs again' >&2; "
            "exit $r; }; }",
            f"chown -R root:root {word}",
            f"chmod -R go-w {word}",
            f"printf '%s\\n' {quote(stamp.decode().strip())} >{shell_path(prefix + '/' + MARKER)}",
            f"rm -f -- {progress}",
        ]
    )
    # A private folder (mktemp -d: unpredictable name, 0700, root's) holds the installer from its
    # arrival through its checksum to its run: nobody can plant a link or swap the file; it is
    # removed whatever happens. Nothing else outside the prefix is recorded (no stale fact).
    command = f'd=$(mktemp -d {UPLOAD_DIR}/provision-installer.XXXXXXXX) || exit 1\n( {script}\n); rc=$?\nrm -rf "$d"\nexit $rc'
    effects = (
        (StateKey("file", f"{prefix}/{MARKER}"), FileState("f", 0o644, "root", "root", hashlib.sha256(stamp).hexdigest(), stamp)),
        (StateKey("file", prefix), FileState("d", 0o755)),
        (StateKey("file", prefix + IN_PROGRESS), None),
        (StateKey("file", f"{prefix}/.condarc"), UNKNOWN),
    )
    describe = f"install {args['installer']} into {prefix}" + (
        " (again: an earlier install was interrupted)" if interrupted else ""
    )
    # the step's limit: the installer's plus time for the checksums and the chown -R of a large prefix
    return [Run(command, describe, effects, timeout=limit + AFTER_INSTALL, uploads=uploads)]


def clone_name(prefix: str) -> str:
    """The clone's environment name: the prefix's last folder (``/opt/anaconda2`` -> anaconda2)."""
    name = prefix.rstrip("/").rsplit("/", 1)[-1]
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name):
        raise ArgumentError(f"conda_clone: prefix {shown_value(prefix)} does not end in a usable environment name")
    return name


def clone_paths(args: dict) -> list[tuple[str, str]]:
    """``(prefix, ~USER/.conda/envs/NAME)`` for each prefix."""
    out = []
    for prefix in args["prefixes"]:
        prefix = check_prefix(prefix, "conda_clone: prefix")
        out.append((prefix, check_path(f"~{args['user']}/.conda/envs/{clone_name(prefix)}")))
    return out


def _clone_requests(args: dict) -> list[StateKey]:
    return [StateKey("file", path + "/conda-meta") for _prefix, path in clone_paths(args)]


def plan_clone(args: dict, current: Mapping[StateKey, Any]) -> list:
    """``conda create -p ~USER/.conda/envs/NAME --clone PREFIX`` for each clone that is absent."""
    changes = []
    for prefix, path in clone_paths(args):
        if current.get(StateKey("file", path + "/conda-meta")) is not None:
            continue
        command = (
            f"umask 022 && mkdir -p {shell_path(parent_of(path))} && "
            f"{shell_path(prefix + '/bin/conda')} create -q -y -p {shell_path(path)} --clone {shell_path(prefix)} >/dev/null"
        )
        changes.append(
            Run(command, f"clone {prefix} to {path}", ((StateKey("file", path + "/conda-meta"), FileState("d", 0o755)),))
        )
    return changes


OPERATIONS = {
    "conda_install": Operation(
        "conda_install",
        {
            "installer": Arg((str,), True, help="controller path or URL"),
            "sha256": Arg((str,), help="the installer's sha256 (this or md5 is required)"),
            "md5": Arg((str,), help="the installer's md5"),
            "prefix": Arg((str,), True, help="install folder; one holding anything else is refused"),
            "min_free_mb": Arg((int,), help="free space needed (default 3x the installer)"),
            "base_dir": Arg((str,), help="folder a relative installer path is read from (the inventory's)"),
            "channels": Arg((list,), help="the channels of the prefix's .condarc (checked here)"),
            "timeout": Arg((int,), help=f"seconds the installer may run (default {INSTALL_TIMEOUT})"),
            "path_form": Arg((str,), default="profile", help="how conda reaches PATH: profile or module (conda_path)"),
        },
        _install_requests,
        plan_install,
        doc="an Anaconda installer run in batch mode into a root-owned prefix",
    ),
    "conda_clone": Operation(
        "conda_clone",
        {
            "user": Arg((str,), True, help="whose clones (~USER/.conda/envs/NAME)"),
            "prefixes": Arg((list,), True, help="the shared prefixes to clone"),
        },
        _clone_requests,
        plan_clone,
        doc="a user's clone of a shared conda prefix (run it with become_user)",
    ),
}
