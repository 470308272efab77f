"""known_hosts files as OpenSSH reads them: which files, which lines name a host, markers.

Which files: ``UserKnownHostsFile`` and ``GlobalKnownHostsFile`` from the host's ssh_config
entry, else OpenSSH's defaults (``~/.ssh/known_hosts ~/.ssh/known_hosts2`` and
``/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2``). Which lines: host patterns with ``*``,
``?`` and ``!negation``, hashed names (``|1|salt|hash``, HMAC-SHA1 as ``ssh-keygen -H`` writes
them), ``[host]:port`` for ports other than 22, and the ``@revoked`` / ``@cert-authority``
markers, which paramiko's own reader silently drops. Pure functions and a stat-keyed cache; the
policy that acts on the entries is :mod:`provision.transport.hostkeys`.
"""

from __future__ import annotations

import base64
import binascii
import getpass
import hmac
import os
import re
import shlex
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_USER_FILES = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_FILES = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
MARKERS = ("@revoked", "@cert-authority")
_HASH_MAGIC = "|1|"


@dataclass(frozen=True)
class KnownHostsFiles:
    """The files to trust for one host: user files first (the first is appended to), then global."""

    user: tuple[Path, ...]
    global_: tuple[Path, ...]
    hash_new: bool = False  # HashKnownHosts: write new entries hashed

    @property
    def all(self) -> tuple[Path, ...]:
        """User files, then global files, in the order OpenSSH reads them."""
        return self.user + self.global_


@dataclass(frozen=True)
class KnownEntry:
    """One usable known_hosts line: marker (None, ``@revoked``, ``@cert-authority``), its host
    field, the key's type (from the key blob itself) and blob, and where it was read."""

    marker: str | None
    hosts: str
    key_type: str
    blob: bytes
    path: Path
    line: int

    @property
    def where(self) -> str:
        """``file:line`` of this entry."""
        return f"{self.path}:{self.line}"


def hostkey_name(host: str, port: int) -> str:
    """The name known_hosts files use: ``host`` on port 22, else ``[host]:port`` (lower case)."""
    host = host.lower()
    return host if int(port) == 22 else f"[{host}]:{port}"


def _expand(path: str) -> Path:
    """``~``, ``%d`` (home), ``%u`` (local user) and ``%%``, as ssh_config allows in these options."""
    home = os.path.expanduser("~")
    if "%" in path:
        path = re.sub(r"%([du%])", lambda m: {"d": home, "u": getpass.getuser(), "%": "%"}[m.group(1)], path)
    return Path(os.path.expanduser(path))


def _paths(value: object, default: tuple[str, ...]) -> tuple[Path, ...]:
    if value is None:
        words = list(default)
    else:
        words = shlex.split(" ".join(value) if isinstance(value, list) else str(value))
    if [w.lower() for w in words] == ["none"]:
        return ()
    return tuple(_expand(word) for word in words)


def known_hosts_files(ssh_config: Mapping[str, object], override: Path | None = None) -> KnownHostsFiles:
    """The files for a host, from its ssh_config lookup (paramiko lower-cases the keys).

    ``override`` (``--known-hosts``) replaces the user files; the global files still apply.
    """
    user = (
        (Path(override).expanduser(),)
        if override is not None
        else _paths(ssh_config.get("userknownhostsfile"), DEFAULT_USER_FILES)
    )
    global_ = _paths(ssh_config.get("globalknownhostsfile"), DEFAULT_GLOBAL_FILES)
    hash_new = str(ssh_config.get("hashknownhosts", "no")).lower() == "yes"
    return KnownHostsFiles(user, global_, hash_new)


def hash_name(name: str, salt: bytes | None = None) -> str:
    """``|1|salt|hash`` for ``name``, as ``ssh-keygen -H`` and ``HashKnownHosts yes`` write it."""
    salt = os.urandom(20) if salt is None else salt
    digest = hmac.digest(salt, name.encode(), "sha1")
    return f"{_HASH_MAGIC}{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def _hash_parts(field: str) -> tuple[bytes, bytes] | None:
    """(salt, digest) of a ``|1|salt|hash`` field; None if malformed."""
    parts = field[len(_HASH_MAGIC) :].split("|")
    if len(parts) != 2:
        return None
    try:
        salt, digest = (base64.b64decode(p, validate=True) for p in parts)
    except (binascii.Error, ValueError):
        return None
    return salt, digest


def _hashed_matches(field: str, name: str) -> bool:
    parts = _hash_parts(field)
    return parts is not None and hmac.digest(parts[0], name.encode(), "sha1") == parts[1]


def glob_matches(pattern: str, name: str) -> bool:
    """OpenSSH's ``*`` (any run) and ``?`` (one character) over the whole ``name``, everything
    else literal. A star only moves the restart point forward, so the cost is at most
    len(pattern) x len(name), never the exponential retries of a regex with one ``.*`` per star
    (``*a*a*a*a*a*b`` against a 253-character name did not finish in a minute).

    >>> glob_matches("node*", "node17"), glob_matches("n?de[1]", "node[1]"), glob_matches("*a*b", "aaaa")
    (True, True, False)
    """
    p = n = 0
    star, resume = -1, 0
    while n < len(name):
        if p < len(pattern) and pattern[p] == "*":
            star, resume = p, n  # try the star as empty first; widen it on a mismatch
            p += 1
        elif p < len(pattern) and pattern[p] in ("?", name[n]):
            p += 1
            n += 1
        elif star >= 0:
            resume += 1
            p, n = star + 1, resume
        else:
            return False
    return all(ch == "*" for ch in pattern[p:])


def host_matches(field: str, name: str) -> bool:
    """Does a known_hosts host field name ``name``? OpenSSH's rules: a hashed field is one name;
    else comma-separated patterns (``*``, ``?``, case-insensitive), and any matching ``!pattern``
    excludes the name whatever else matches."""
    if field.startswith(_HASH_MAGIC):
        return _hashed_matches(field, name)
    name = name.lower()
    positive = False
    for pattern in field.lower().split(","):
        negated = pattern.startswith("!")
        if glob_matches(pattern[1:] if negated else pattern, name):
            if negated:
                return False
            positive = True
    return positive


def _blob_type(blob: bytes) -> str | None:
    """The key type written inside an SSH public key blob (its first string)."""
    if len(blob) < 4:
        return None
    (length,) = struct.unpack(">I", blob[:4])
    if not 0 < length <= 64 or len(blob) < 4 + length:
        return None
    try:
        return blob[4 : 4 + length].decode("ascii")
    except UnicodeDecodeError:
        return None


def parse_line(text: str, path: Path, number: int) -> KnownEntry | None:
    """One known_hosts line as an entry; None for comments, blank, malformed or unknown-marker
    lines (skipped, as OpenSSH skips them)."""
    fields = text.split()
    if not fields or fields[0].startswith("#"):
        return None
    marker = None
    if fields[0].startswith("@"):
        if fields[0] not in MARKERS:
            return None
        marker, fields = fields[0], fields[1:]
    if len(fields) < 3:
        return None
    try:
        blob = base64.b64decode(fields[2], validate=True)
    except (binascii.Error, ValueError):
        return None
    key_type = _blob_type(blob)
    if key_type is None:
        return None
    return KnownEntry(marker, fields[0], key_type, blob, path, number)


@dataclass(frozen=True)
class _Parsed:
    exact: dict[str, tuple[KnownEntry, ...]]  # plain names (no wildcard, negation or hash) -> entries
    hashed: tuple[tuple[bytes, bytes, KnownEntry], ...]  # (salt, digest, entry), decoded once
    other: tuple[KnownEntry, ...]  # pattern entries: matched one by one


def _index(entries: list[KnownEntry]) -> _Parsed:
    exact: dict[str, list[KnownEntry]] = {}
    hashed, other = [], []
    for entry in entries:
        if entry.hosts.startswith(_HASH_MAGIC):
            parts = _hash_parts(entry.hosts)
            if parts is not None:
                hashed.append((*parts, entry))
        elif any(c in entry.hosts for c in "*?!"):
            other.append(entry)
        else:
            for name in dict.fromkeys(entry.hosts.lower().split(",")):
                exact.setdefault(name, []).append(entry)
    return _Parsed({k: tuple(v) for k, v in exact.items()}, tuple(hashed), tuple(other))


def _extend(base: _Parsed, entries: list[KnownEntry]) -> _Parsed:
    """``base`` with ``entries`` (later lines) indexed too; ``base`` itself is left as it was
    (another thread may be reading it)."""
    if not entries:
        return base
    more = _index(entries)
    exact = dict(base.exact)
    for name, found in more.exact.items():
        exact[name] = exact.get(name, ()) + found
    return _Parsed(exact, base.hashed + more.hashed, base.other + more.other)


def _entries(text: str, path: Path, before: int) -> tuple[int, list[KnownEntry]]:
    """The lines of ``text`` (numbered from ``before`` + 1): how many, and their entries."""
    lines = text.splitlines()
    return len(lines), [e for n, line in enumerate(lines, before + 1) if (e := parse_line(line, path, n)) is not None]


@dataclass(frozen=True)
class _Version:
    """A file as last read: its stamp, its bytes up to the last newline and their line count and
    entries (``whole``), and the entries with an unfinished last line too (``parsed``)."""

    stamp: tuple[int, int, int]
    head: bytes
    lines: int
    whole: _Parsed
    parsed: _Parsed


_cache: dict[Path, _Version] = {}
_cache_lock = threading.Lock()
_EMPTY = _Parsed({}, (), ())


def _read(path: Path) -> _Parsed:
    """``path``'s entries, indexed; re-read when its stamp changes. A file that only grew (keys
    appended, as --accept-new-host-keys and ssh do) has only its new lines parsed: a probe that
    learned 4096 hosts' keys re-parsed the whole file for each next host, O(hosts²) (issue 37)."""
    try:
        stat = path.stat()
    except OSError:
        return _EMPTY
    stamp = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _cache_lock:
        cached = _cache.get(path)
        if cached is not None and cached.stamp == stamp:
            return cached.parsed
    try:
        data = path.read_bytes()
    except OSError:
        return _EMPTY
    if cached is not None and cached.stamp[0] == stamp[0] and data.startswith(cached.head):
        start, before, base = len(cached.head), cached.lines, cached.whole  # the same lines, and more after them
    else:
        start, before, base = 0, 0, _EMPTY
    cut = data.rfind(b"\n", start) + 1 or start  # the new complete lines end there; an unfinished one follows
    count, complete = _entries(data[start:cut].decode(errors="replace"), path, before)
    whole = _extend(base, complete)
    _, unfinished = _entries(data[cut:].decode(errors="replace"), path, before + count)
    version = _Version(stamp, data[:cut], before + count, whole, _extend(whole, unfinished))
    with _cache_lock:
        _cache[path] = version
    return version.parsed


def entries_for(name: str, files: KnownHostsFiles) -> list[KnownEntry]:
    """All entries (plain and marked) of ``files`` whose host field names ``name``, in file order.

    A missing or unreadable file has none, as for OpenSSH. Each file is parsed once per version
    (inode, size, mtime) and indexed by plain name, so probing thousands of hosts against a
    global file of thousands of lines stays linear; hashed and wildcard lines are matched one by one.
    """
    name = name.lower()
    encoded = name.encode()
    found = []
    for path in dict.fromkeys(files.all):
        parsed = _read(path)
        hits = list(parsed.exact.get(name, ()))
        hits += [e for salt, digest, e in parsed.hashed if hmac.digest(salt, encoded, "sha1") == digest]
        hits += [e for e in parsed.other if host_matches(e.hosts, name)]
        found.extend(sorted(hits, key=lambda e: e.line))
    return found
