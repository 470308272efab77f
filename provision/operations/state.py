"""Host state as operations need it: each :class:`StateKey` kind names a :class:`Fact` of the
registry (:func:`provision.facts.registry.fact`), of one thing (a path, a user, a package: the
key's ``arg``) or fixed (the package manager, a probe fact such as ``uname-m``: no ``arg``). The
facts operations read are declared here, in :mod:`provision.operations.os_state` and
:mod:`~.role_state` (their commands need this layer's checks), and in ``provision/facts/``
(:mod:`provision.facts.sysctl`). The output is treated as hostile: sizes are bounded and every
field is checked before it is believed.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from provision.errors import ParseError
from provision.facts.registry import Fact, fact
from provision.inventory.model import check_user
from provision.operations.base import (
    PACKAGE_NAME,
    SERVICE_NAME,
    FileState,
    GroupEntry,
    ServiceState,
    StateKey,
    UserEntry,
    check_path,
    quote,
)
from provision.operations.paths import path_command
from provision.text import is_number, shown_value

_SHA = re.compile(r"^[0-9a-f]{64}(?:  -)?\Z")  # a file over the read limit: sha256sum's line
# What a node may call itself (a DNS name) and a host key line ("type blob"): anything else it
# reports is dropped here, before it reaches every node's known_hosts or a pairwise ssh command.
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")
_HOST_KEY = re.compile(r"^(?:ssh|ecdsa|sk)-[a-z0-9@.-]{1,64} [A-Za-z0-9+/]{1,8192}={0,3}\Z")
_HOME_FS = re.compile(r"^[a-z0-9_./-]{1,32} \d{1,20}:\d{1,20}(?: [A-Za-z0-9_.:/@\[\]-]{1,256})?\Z")


def _file_command(path: str) -> str:
    return path_command("file", check_path(path))


def _stat_command(path: str) -> str:
    # Metadata only (type, mode, owner, group, size): the file is never opened, so a secret such
    # as a private key never leaves the node.
    return path_command("stat", check_path(path))


def _exists_command(path: str) -> str:
    # Whether the name is there (a link counts, whatever it points at): never opened, never followed.
    return path_command("exists", check_path(path))


def _user_command(name: str) -> str:
    word = quote(check_user(name))
    return f"getent passwd {word} && id -Gn {word}; true"


def _id_command(kind: str):
    def command(number: str) -> str:
        if not is_number(number):
            raise ValueError(f"{kind} {shown_value(number)} is not a number")
        return f"getent {'passwd' if kind == 'uid' else 'group'} {number} | cut -d: -f1"

    return command


def _package_command(package: str) -> str:
    if not PACKAGE_NAME.match(package):
        raise ValueError(f"package {shown_value(package)}")
    name = quote(package)
    return (
        f"if command -v dpkg-query >/dev/null; then dpkg-query -W -f='${{db:Status-Abbrev}}|${{Version}}' {name} 2>/dev/null; "  # noqa: E501 - one literal, kept whole to be read or grepped
        f"elif command -v rpm >/dev/null; then rpm -q --qf 'ii |%{{VERSION}}' {name} 2>/dev/null; fi; true"
    )


def _service_command(service: str) -> str:
    if not SERVICE_NAME.match(service):
        raise ValueError(f"service {shown_value(service)}")
    name = quote(service)
    return (
        f"systemctl is-active {name} 2>/dev/null || true; systemctl is-enabled {name} 2>/dev/null || echo unknown; "
        f"systemctl show -p NeedDaemonReload --value {name} 2>/dev/null || echo no"
    )


_HOSTINFO = (
    'echo "h $(hostname)"; echo "f $(hostname -f 2>/dev/null)"; '
    'for a in $(hostname -I 2>/dev/null); do echo "a $a"; done; '
    'for k in /etc/ssh/ssh_host_*_key.pub; do [ -r "$k" ] && echo "k $(cat "$k")"; done; '
    # /home's file system type, dev:inode and source: a shared /home is the same on every node.
    'echo "m $(stat -f -c %T /home 2>/dev/null) $(stat -c %d:%i /home 2>/dev/null) '
    "$(df -P /home 2>/dev/null | awk 'NR==2 {print $1}')\"; true"
)


_KINDS = {"regular file": "f", "regular empty file": "f", "directory": "d", "symbolic link": "l", "hard link": "h"}


def _parse_path(kind: str):
    def parse(path: str, text: str) -> FileState | bool | None:
        lines = text.splitlines()
        if not lines or lines[0] == "absent":
            return None
        if lines[0].startswith(("below|", "sticky|", "changing|")):  # the walk: a folder above the path others can write
            fields = _fields(kind, path, lines[0])
            folder = lines[1] if len(lines) > 1 else "?"
            if fields[0] in ("below", "changing"):
                refused = "u" if fields[0] == "below" else "r"
                return FileState(refused, int(fields[1], 8), fields[2], fields[3], below=folder, acl=fields[4] == "acl")
            rest = lines[2:]  # sticky: the name itself: absent, the reader's own ("own") or another's ("other")
            if not rest or rest[0] == "absent":
                return FileState("s", int(fields[1], 8), fields[2], fields[3], below=folder, mine=True)
            if rest[0] not in ("own", "other") or len(rest) < 2:
                raise ParseError(f"{kind} {path}", f"unexpected line {shown_value(rest[0][:80])}")
            if kind == "exists":
                if rest[1] != "present":
                    raise ParseError(f"{kind} {path}", f"unexpected line {shown_value(rest[1][:80])}")
                entry: Any = True
            else:
                entry = _entry(kind, path, rest[1:])
            return FileState("s", int(fields[1], 8), fields[2], fields[3], below=folder, entry=entry, mine=rest[0] == "own")
        if kind == "exists":
            if lines[0] != "present":
                raise ParseError(f"{kind} {path}", f"unexpected line {shown_value(lines[0][:80])}")
            return True
        return _entry(kind, path, lines)

    return parse


def _fields(kind: str, path: str, line: str) -> list[str]:
    fields = line.split("|")
    if len(fields) != 5 or not re.fullmatch(r"[0-7]{1,4}", fields[1]):
        raise ParseError(f"{kind} {path}", f"unexpected stat line {shown_value(line[:80])}")
    return fields


def _entry(kind: str, path: str, lines: list[str]) -> FileState:
    """The path's own stat line, then (a ``file`` read of a regular file) its content as
    ``=BASE64`` (the sha256 computed here) or, over the read limit, sha256sum's line."""
    fields = _fields(kind, path, lines[0])
    ftype = _KINDS.get(fields[0], "o")
    mode, owner, group = int(fields[1], 8), fields[2], fields[3]
    if ftype in ("l", "h") or kind == "stat":  # never read through; metadata only
        return FileState(ftype, mode, owner, group)
    sha = content = None
    if ftype == "f" and len(lines) > 1 and lines[1].startswith("="):
        try:
            content = base64.b64decode(lines[1][1:], validate=True)
        except ValueError:  # binascii.Error, and non-ASCII text (b64decode refuses it with a plain ValueError)
            raise ParseError(f"{kind} {path}", "file content is not base64") from None
        if not is_number(fields[4]) or len(content) != int(fields[4]):
            content = None  # changed (or swapped) while it was read: neither its content nor its sha256 is known
        else:
            sha = hashlib.sha256(content).hexdigest()
    elif ftype == "f" and len(lines) > 1 and _SHA.match(lines[1]):
        sha = lines[1][:64]
    return FileState(ftype, mode, owner, group, sha, content)


def _parse_user(name: str, text: str) -> UserEntry | None:
    lines = text.splitlines()
    if not lines:
        return None
    parts = lines[0].split(":")
    if len(parts) != 7 or not is_number(parts[2]) or not is_number(parts[3]):
        raise ParseError(f"user {name}", f"unexpected passwd entry {shown_value(lines[0][:80])}")
    groups = tuple(lines[1].split()) if len(lines) > 1 else ()
    return UserEntry(parts[0], int(parts[2]), int(parts[3]), parts[5], parts[6], groups[1:] if groups else ())


def _parse_group(name: str, text: str) -> GroupEntry | None:
    lines = text.splitlines()
    if not lines:
        return None
    parts = lines[0].split(":")
    if len(parts) != 4 or not is_number(parts[2]):
        raise ParseError(f"group {name}", f"unexpected group entry {shown_value(lines[0][:80])}")
    return GroupEntry(parts[0], int(parts[2]))


def _first_word(text: str) -> str | None:
    lines = text.splitlines()
    return lines[0].strip() if lines and lines[0].strip() else None


def _parse_first_word(_arg: str, text: str) -> str | None:
    return _first_word(text)


def _parse_yes(text: str) -> bool:
    lines = text.splitlines()
    return bool(lines) and lines[0] == "yes"


def _parse_package(_name: str, text: str) -> str | None:
    lines = text.splitlines()
    head = lines[0] if lines else ""
    return head.split("|", 1)[1] if head.startswith("ii") and "|" in head else None


def _parse_exit_code(command: str, text: str) -> int:
    lines = text.splitlines()
    if not lines or not is_number(lines[-1].strip()):
        raise ParseError(f"command {command}".strip(), "no exit code")
    return int(lines[-1].strip())


def _parse_service(_name: str, text: str) -> ServiceState:
    lines = text.splitlines()
    active = lines[0].strip() if lines else "unknown"
    enabled = lines[1].strip() if len(lines) > 1 else "unknown"
    need_reload = len(lines) > 2 and lines[2].strip() == "yes"
    return ServiceState(active or "unknown", enabled or "unknown", need_reload)


def _parse_hostinfo(text: str) -> dict[str, Any]:
    info: dict[str, Any] = {"hostname": "", "fqdn": "", "addresses": [], "host_keys": []}
    for line in text.splitlines()[:200]:
        tag, _, value = line.partition(" ")
        value = value.strip()[:8192]
        if tag == "h" and _HOST_NAME.match(value):
            info["hostname"] = value
        elif tag == "f" and _HOST_NAME.match(value):
            info["fqdn"] = value
        elif tag == "a" and re.fullmatch(r"[0-9A-Fa-f:.]{1,45}", value):
            info["addresses"].append(value)
        elif tag == "k" and _HOST_KEY.match(" ".join(value.split()[:2])):
            info["host_keys"].append(" ".join(value.split()[:2]))
        elif tag == "m" and _HOME_FS.match(value):
            fs, ident, source = (value.split() + [""])[:3]
            info["home"] = {"fs": fs, "id": ident, "source": source}
    info["short"] = info["hostname"].split(".")[0]
    return info


FILE = Fact(
    "file", (), _file_command, "a path's type, mode, owner and group; a file's sha256 and content", _parse_path("file"), path=True
)
STAT = Fact("stat", (), _stat_command, "a path's type, mode, owner and group (never its content)", _parse_path("stat"), path=True)
EXISTS = Fact(
    "exists", (), _exists_command, "whether a name is there (a link counts; never followed)", _parse_path("exists"), path=True
)
USER = Fact("user", (), _user_command, "a user's passwd entry and groups", _parse_user)
GROUP = Fact("group", (), lambda name: f"getent group {quote(check_user(name, 'group'))}; true", "a group's entry", _parse_group)
UID = Fact("uid", (), _id_command("uid"), "the user name a uid has", _parse_first_word)
GID = Fact("gid", (), _id_command("gid"), "the group name a gid has", _parse_first_word)
PKGMGR = Fact(
    "pkgmgr",
    (),
    "if command -v apt-get >/dev/null; then echo apt; elif command -v dnf >/dev/null; then echo dnf; "
    "elif command -v yum >/dev/null; then echo yum; fi",
    "the package manager: apt, dnf or yum",
    _first_word,
    stable=True,
)
PACKAGE = Fact("package", (), _package_command, "an installed package's version", _parse_package)
COMMAND = Fact(
    "command", (), lambda command: f"( {command}\n) >/dev/null 2>&1 </dev/null; echo $?", "a check's exit code", _parse_exit_code
)
SYSTEMD = Fact(
    "systemd",
    (),
    "[ -d /run/systemd/system ] && echo yes || echo no",
    "whether systemd runs",
    _parse_yes,
    stable=True,  # installing a package never makes systemd the init
)
SERVICE = Fact("service", (), _service_command, "a service's active and enabled state", _parse_service)
HOSTINFO = Fact(
    "hostinfo", (), _HOSTINFO, "host name, addresses, host keys and /home's file system", _parse_hostinfo, stable=True
)


def state_fact(key: StateKey) -> Fact:
    """The fact a :class:`StateKey` kind names, found by the registry whatever was imported before
    (ValueError: none has that name, or an argument for a fixed fact)."""
    try:
        found = fact(key.kind)
    except KeyError:
        raise ValueError(f"unknown fact kind {key.kind!r}") from None
    if key.arg and not found.takes_arg:
        raise ValueError(f"fact {key.kind!r} is read without an argument (got {shown_value(key.arg[:60])})")
    return found


def reads_path(key: StateKey) -> bool:
    """Whether ``key``'s fact is one of a path on the node (declared ``path``: file, stat, exists)."""
    return state_fact(key).path


def state_command(key: StateKey) -> str:
    """The POSIX sh that prints ``key``'s raw state (values quoted; never raw)."""
    return state_fact(key).state_command(key.arg)


def parse_state(key: StateKey, text: str) -> Any:
    """Parse ``key``'s output (see :func:`state_command`); raises :class:`ParseError` when it is
    not what that command prints."""
    try:
        found = state_fact(key)
    except ValueError as error:
        raise ParseError(f"{key.kind} {key.arg}".strip(), str(error)) from None
    return found.read_state(text, key.arg)
