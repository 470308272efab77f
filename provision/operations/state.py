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
import re
from typing import Any

from provision.errors import ParseError
from provision.facts.registry import Fact, fact
from provision.operations.base import (
    PACKAGE_NAME,
    SERVICE_NAME,
    FileState,
    GroupEntry,
    ServiceState,
    StateKey,
    UserEntry,
    check_path,
    check_user,
    home_prelude,
    quote,
    shell_path,
)
from provision.text import is_number, shown_value

CONTENT_LIMIT = 4 * 1024 * 1024  # files larger than this are compared by sha256 only
_SHA = re.compile(r"^[0-9a-f]{64}\Z")
# What a node may call itself (a DNS name) and a host key line ("type blob"): anything else it
# reports is dropped here, before it reaches every node's known_hosts or a pairwise ssh command.
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")
_HOST_KEY = re.compile(r"^(?:ssh|ecdsa|sk)-[a-z0-9@.-]{1,64} [A-Za-z0-9+/]{1,8192}={0,3}\Z")
_HOME_FS = re.compile(r"^[a-z0-9_./-]{1,32} \d{1,20}:\d{1,20}(?: [A-Za-z0-9_.:/@\[\]-]{1,256})?\Z")

# The path as the reading user may act on it, without following a final link: a folder above it
# that another user can write (owned by someone else than the reader and root, or group/other
# writable without the sticky bit) prints ``below|MODE|OWNER|GROUP|0`` and that folder; a link
# prints its own stat line ("symbolic link"); a regular file with other names that the reader
# does not own, "hard link". Folders are checked as written and as resolved (readlink -f); where
# the two are the same folders (no link on the way, the usual case) they are walked once: each
# folder costs a stat process, and these reads are most of a converged round trip (issue 28).
_PATH_STATE = (
    'r="$(readlink -f -- "${p%/*}" 2>/dev/null)/"; '
    'if [ "$r" = "${p%/*}/" ]; then set -- "$p"; else set -- "$p" "$r"; fi; '
    'for a in "$@"; do q=$a; while [ -n "$q" ]; do q=${q%/*}; d=${q:-/}; '
    'if [ -d "$d" ]; then set -- $(stat -L -c \'%a %u\' "$d"); m=$((0$1)); '
    'if { [ "$2" -ne 0 ] && [ ! -O "$d" ]; } || { [ $((m & 01000)) -eq 0 ] && '
    '{ [ $((m & 02)) -ne 0 ] || { [ $((m & 020)) -ne 0 ] && [ ! -G "$d" ]; }; }; }; then '
    "stat -L -c 'below|%a|%U|%G|0' \"$d\"; printf '%s\\n' \"$d\"; exit 0; fi; fi; done; done; "
    'if [ -L "$p" ]; then stat -c \'%F|%a|%U|%G|%s\' "$p"; exit 0; fi; '
    '[ -e "$p" ] || { echo absent; exit 0; }; '
    'if [ -f "$p" ] && [ "$(stat -c %h "$p")" -gt 1 ] && [ ! -O "$p" ]; then stat -c \'hard link|%a|%U|%G|%s\' "$p"; exit 0; fi; '
    "stat -c '%F|%a|%U|%G|%s' \"$p\"; "
)


def _file_command(path: str) -> str:
    word = shell_path(check_path(path))
    body = (
        f"p={word}; {_PATH_STATE}"
        'if [ -f "$p" ] && [ -r "$p" ]; then sha256sum <"$p" | cut -c1-64; '
        f'if [ "$(stat -c %s "$p")" -le {CONTENT_LIMIT} ]; then base64 <"$p" | tr -d \'\\n\'; echo; fi; fi'
    )
    return _with_home(body)


def _stat_command(path: str) -> str:
    # Metadata only (type, mode, owner, group, size): the file is never opened, so a secret such
    # as a private key never leaves the node.
    return _with_home(f"p={shell_path(check_path(path))}; {_PATH_STATE}")


def _with_home(body: str) -> str:
    prelude = home_prelude(body)
    if prelude:  # a missing user means the path does not exist (yet)
        return f"( {prelude.replace('exit 91', 'echo absent; exit 0')}\n{body} )"
    return f"( {body} )"  # its own subshell: the state ends with ``exit``


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


def _parse_path(kind: str):
    def parse(path: str, text: str) -> FileState | None:
        lines = text.splitlines()
        source = f"{kind} {path}"
        if not lines or lines[0] == "absent":
            return None
        fields = lines[0].split("|")
        if len(fields) != 5 or not re.fullmatch(r"[0-7]{1,4}", fields[1]):
            raise ParseError(source, f"unexpected stat line {shown_value(lines[0][:80])}")
        if fields[0] == "below":  # a folder above the path that another user can write
            return FileState("u", int(fields[1], 8), fields[2], fields[3], below=lines[1] if len(lines) > 1 else "?")
        kinds = {"regular file": "f", "regular empty file": "f", "directory": "d", "symbolic link": "l", "hard link": "h"}
        ftype = kinds.get(fields[0], "o")
        if ftype in ("l", "h"):  # never read through
            return FileState(ftype, int(fields[1], 8), fields[2], fields[3])
        if kind == "stat":  # metadata only: no checksum, no content
            return FileState(ftype, int(fields[1], 8), fields[2], fields[3])
        sha = lines[1] if len(lines) > 1 and _SHA.match(lines[1]) else None
        content = None
        if ftype == "f" and len(lines) > 2:
            try:
                content = base64.b64decode(lines[2], validate=True)
            except ValueError:  # binascii.Error, and non-ASCII text (b64decode refuses it with a plain ValueError)
                raise ParseError(source, "file content is not base64") from None
        elif ftype == "f" and sha is not None and fields[4] == "0":
            content = b""
        return FileState(ftype, int(fields[1], 8), fields[2], fields[3], sha, content)

    return parse


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


FILE = Fact("file", (), _file_command, "a path's type, mode, owner and group; a file's sha256 and content", _parse_path("file"))
STAT = Fact("stat", (), _stat_command, "a path's type, mode, owner and group (never its content)", _parse_path("stat"))
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
