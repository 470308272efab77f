"""Anaconda in a shared prefix (``/opt/anaconda3``) with per-user clones, as the seed does by hand.

- ``conda_install``: an installer from a controller file (checked against its required sha256 or
  md5 on the controller, before any host is touched) or from a URL (checked on the node after
  the download), run in batch mode ``bash INSTALLER -b -p PREFIX`` under umask 022 after a
  free-space check; the prefix then belongs to root and nobody else may write to it. A marker
  ``PREFIX/.provision-installer`` holds the installer's checksum: the same install is skipped,
  a prefix that holds anything else is refused (never overwritten).
- ``conda_clone``: for each prefix, ``conda create -p ~USER/.conda/envs/NAME --clone PREFIX`` (NAME:
  the prefix's last folder), run as the user
  (``become_user`` in the playbook), skipped when the clone exists.
The playbook puts conda on non-interactive SSH sessions (mpirun) with ``block_top`` (in
:mod:`provision.operations.files`): Debian's /etc/bash.bashrc returns early for them.
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provision.operations.base import (
    UNKNOWN,
    Arg,
    ArgumentError,
    FactKey,
    FileState,
    Operation,
    OperationError,
    Run,
    check_path,
    parent_of,
    printable,
    quote,
    shell_path,
)

MARKER = ".provision-installer"
UPLOAD_DIR = "/var/tmp"  # the installer goes to a private ``mktemp -d`` folder (0700, root) in here
_PREFIX = re.compile(r"^/[A-Za-z0-9._/+-]+$")  # written raw-safe into shell profiles and .condarc
_CHANNEL = re.compile(r"^[A-Za-z0-9._:/@+-]+$")
_URL = re.compile(r"^(https?|ftp)://[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+$")
_HEX = {"sha256": re.compile(r"^[0-9a-f]{64}$"), "md5": re.compile(r"^[0-9a-f]{32}$")}


def checksum_of(args: dict) -> tuple[str, str]:
    """``(algorithm, hex digest)`` from ``sha256`` or ``md5`` (one is required)."""
    for algorithm in ("sha256", "md5"):
        value = args.get(algorithm)
        if value:
            value = str(value).strip().lower()
            if not _HEX[algorithm].match(value):
                raise ArgumentError(f"anaconda {args['installer']}: {algorithm} {value!r} is not a {algorithm} digest")
            return algorithm, value
    raise ArgumentError(f"anaconda {args['installer']}: a checksum is required (sha256, or md5 as the archive lists)")


def check_prefix(prefix: Any, what: str = "anaconda prefix") -> str:
    """A prefix that is safe in every login shell's profile: ``/`` then only letters, digits and
    ``._/+-``, normalised; else :class:`ArgumentError` naming the value."""
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise ArgumentError(f"{what} {prefix!r} may only hold letters, digits and ._/+- after a leading /")
    return check_path(prefix)


def check_channels(channels: Any) -> list[str]:
    """The ``.condarc`` channels: names or URLs of letters, digits and ``._:/@+-``; else
    :class:`ArgumentError` naming the value."""
    if channels is None:
        return []
    if not isinstance(channels, list):
        raise ArgumentError(f"anaconda channels {channels!r} must be a list")
    for channel in channels:
        if not isinstance(channel, str) or not _CHANNEL.match(channel):
            raise ArgumentError(f"conda channel {channel!r} may only hold letters, digits and ._:/@+-")
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


MAX_UPLOAD = 512 * 1024 * 1024  # a controller file travels inside the engine's script: larger ones by URL
_READ_LOCK = threading.Lock()
_READ: dict[tuple, bytes] = {}  # (path, size, mtime) -> content: read once per run, not once per host


def verify_local(args: dict) -> bytes:
    """Read the controller installer and check its checksum; bad input when missing or wrong."""
    algorithm, digest = checksum_of(args)
    path = local_installer(args)
    try:
        stat = path.stat()
        if stat.st_size > MAX_UPLOAD:
            raise ArgumentError(
                f"anaconda installer {path}: {stat.st_size // 2**20} MiB is more than the "
                f"{MAX_UPLOAD // 2**20} MiB sent from the controller; give its URL (the nodes fetch it)"
            )
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        with _READ_LOCK:  # hosts plan in parallel threads
            if key not in _READ:
                if len(_READ) >= 4:
                    _READ.clear()
                _READ[key] = path.read_bytes()
            data = _READ[key]
    except OSError as error:
        raise ArgumentError(f"anaconda installer {path}: {error.strerror or error}") from None
    got = hashlib.new(algorithm, data).hexdigest()
    if got != digest:
        raise ArgumentError(f"anaconda installer {path}: {algorithm} is {got}, expected {digest} (wrong or damaged file)")
    return data


def _install_requests(args: dict) -> list[FactKey]:
    prefix = check_path(args["prefix"])
    if prefix.startswith("~") or prefix.count("/") < 2:
        raise ArgumentError(f"anaconda prefix {prefix!r} must be an absolute folder below / (e.g. /opt/anaconda3)")
    prefix = check_prefix(args["prefix"])
    check_channels(args.get("channels"))
    if is_url(args["installer"]):
        checksum_of(args)
        if not _URL.match(args["installer"]):
            raise ArgumentError(f"anaconda installer {args['installer']!r} is not an http(s)/ftp URL")
    else:
        verify_local(args)  # before any host is touched
    return [FactKey("file", prefix), FactKey("file", f"{prefix}/{MARKER}"), FactKey("df", prefix)]


def _size_needed_kib(args: dict, installer_bytes: int) -> int:
    if args["min_free_mb"]:
        return int(args["min_free_mb"]) * 1024
    return max(3 * installer_bytes // 1024, 64 * 1024)  # an installer unpacks to ~3x its size


def plan_install(args: dict, facts: Mapping[FactKey, Any]) -> list:
    """Send/download the installer into a private ``mktemp -d`` folder, check it, run it in batch
    mode, remove the folder, lock the prefix down; or nothing."""
    prefix = check_prefix(args["prefix"])
    algorithm, digest = checksum_of(args)
    stamp = f"{algorithm}:{digest}\n".encode()
    marker = facts.get(FactKey("file", f"{prefix}/{MARKER}"))
    if marker is not None and marker.content == stamp:
        return []
    if facts.get(FactKey("file", prefix)) is not None:
        held = (
            printable(marker.content.decode(errors="replace"), 120)
            if marker and marker.content
            else "an install provision did not make"
        )
        raise OperationError(
            f"{prefix} already exists and holds {held}; refusing to install over it (remove it, or choose another prefix)"
        )
    local = None if is_url(args["installer"]) else verify_local(args)
    needed = _size_needed_kib(args, len(local) if local is not None else 0)
    free = facts.get(FactKey("df", prefix))
    if free is not None and free < needed:
        raise OperationError(
            f"not enough free disk space for {prefix}: {free // 1024} MiB free on its filesystem, "
            f"{needed // 1024} MiB needed (set min_free_mb to change the estimate)"
        )
    tool = "sha256sum" if algorithm == "sha256" else "md5sum"
    if local is None:
        url = quote(args["installer"])
        fetch = (
            f'{{ if command -v curl >/dev/null; then curl -fsSL -o "$d/installer.sh" {url}; '
            f'else wget -q -O "$d/installer.sh" {url}; fi; }} '
            "|| { echo 'download failed' >&2; exit 1; }"
        )
    else:  # the installer travels inside the script (as a Write would), straight into the private folder
        fetch = f"printf %s '{base64.b64encode(local).decode()}' | base64 -d >\"$d/installer.sh\""
    script = " && ".join(
        [
            "umask 022",
            fetch,
            f"got=$({tool} <\"$d/installer.sh\" | cut -d' ' -f1)",
            f'{{ [ "$got" = {digest} ] || {{ echo "installer {algorithm} mismatch on the node: got $got" >&2; exit 1; }}; }}',
            f"mkdir -p {shell_path(parent_of(prefix))}",
            f'bash "$d/installer.sh" -b -p {shell_path(prefix)} >/dev/null',
            f"chown -R root:root {shell_path(prefix)}",
            f"chmod -R go-w {shell_path(prefix)}",
            f"printf '%s\\n' {quote(stamp.decode().strip())} >{shell_path(prefix + '/' + MARKER)}",
        ]
    )
    # A private folder (mktemp -d: unpredictable name, 0700, root's) holds the installer from its
    # download through its checksum to its run: nobody can plant a link or swap the file; it is
    # removed whatever happens. Nothing outside the prefix is recorded (no stale fact).
    command = f'd=$(mktemp -d {UPLOAD_DIR}/provision-installer.XXXXXXXX) || exit 1\n( {script}\n); rc=$?\nrm -rf "$d"\nexit $rc'
    effects = (
        (FactKey("file", f"{prefix}/{MARKER}"), FileState("f", 0o644, "root", "root", hashlib.sha256(stamp).hexdigest(), stamp)),
        (FactKey("file", prefix), FileState("d", 0o755)),
        (FactKey("file", f"{prefix}/.condarc"), UNKNOWN),
    )
    return [Run(command, f"install {args['installer']} into {prefix}", effects)]


def clone_name(prefix: str) -> str:
    """The clone's environment name: the prefix's last folder (``/opt/anaconda2`` -> anaconda2)."""
    name = prefix.rstrip("/").rsplit("/", 1)[-1]
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name):
        raise ArgumentError(f"conda_clone: prefix {prefix!r} does not end in a usable environment name")
    return name


def clone_paths(args: dict) -> list[tuple[str, str]]:
    """``(prefix, ~USER/.conda/envs/NAME)`` for each prefix."""
    out = []
    for prefix in args["prefixes"]:
        prefix = check_prefix(prefix, "conda_clone: prefix")
        out.append((prefix, check_path(f"~{args['user']}/.conda/envs/{clone_name(prefix)}")))
    return out


def _clone_requests(args: dict) -> list[FactKey]:
    return [FactKey("file", path + "/conda-meta") for _prefix, path in clone_paths(args)]


def plan_clone(args: dict, facts: Mapping[FactKey, Any]) -> list:
    """``conda create -p ~USER/.conda/envs/NAME --clone PREFIX`` for each clone that is absent."""
    changes = []
    for prefix, path in clone_paths(args):
        if facts.get(FactKey("file", path + "/conda-meta")) is not None:
            continue
        command = (
            f"umask 022 && mkdir -p {shell_path(parent_of(path))} && "
            f"{shell_path(prefix + '/bin/conda')} create -q -y -p {shell_path(path)} --clone {shell_path(prefix)} >/dev/null"
        )
        changes.append(
            Run(command, f"clone {prefix} to {path}", ((FactKey("file", path + "/conda-meta"), FileState("d", 0o755)),))
        )
    return changes


OPERATIONS = {
    "conda_install": Operation(
        "conda_install",
        {
            "installer": Arg((str,), True, help="controller path or URL"),
            "sha256": Arg((str,)),
            "md5": Arg((str,)),
            "prefix": Arg((str,), True),
            "min_free_mb": Arg((int,)),
            "base_dir": Arg((str,)),
            "channels": Arg((list,), help="the channels of the prefix's .condarc (checked here)"),
        },
        _install_requests,
        plan_install,
        doc="an Anaconda installer run in batch mode into a root-owned prefix",
    ),
    "conda_clone": Operation(
        "conda_clone",
        {"user": Arg((str,), True), "prefixes": Arg((list,), True)},
        _clone_requests,
        plan_clone,
        doc="a user's clone of a shared conda prefix (run it with become_user)",
    ),
}
