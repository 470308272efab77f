"""Host state as operations need it: for each :class:`StateKey` kind, the shell that reads it and a
pure parser of its output (pyinfra's fact model). The output is treated as hostile: sizes are
bounded and every field is checked before it is believed.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from provision.errors import ParseError
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
    is_number,
    quote,
    shell_path,
)

CONTENT_LIMIT = 4 * 1024 * 1024  # files larger than this are compared by sha256 only
_SHA = re.compile(r"^[0-9a-f]{64}\Z")
# What a node may call itself (a DNS name) and a host key line ("type blob"): anything else it
# reports is dropped here, before it reaches every node's known_hosts or a pairwise ssh command.
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")
_HOST_KEY = re.compile(r"^(?:ssh|ecdsa|sk)-[a-z0-9@.-]{1,64} [A-Za-z0-9+/]{1,8192}={0,3}\Z")
_HOME_FS = re.compile(r"^[a-z0-9_./-]{1,32} \d{1,20}:\d{1,20}(?: [A-Za-z0-9_.:/@\[\]-]{1,256})?\Z")

# Fact kinds added by other modules (the roles of issue 8): kind -> (command(arg), parse(arg, text)).
EXTRA_KINDS: dict[str, tuple[Any, Any]] = {}


def register_state_kind(kind: str, command, parse) -> None:
    """Add a fact kind: ``command(arg)`` returns its POSIX sh, ``parse(arg, text)`` its value
    (raising :class:`ParseError` on output that command cannot print)."""
    EXTRA_KINDS[kind] = (command, parse)


# The path as the reading user may act on it, without following a final link: a folder above it
# that another user can write (owned by someone else than the reader and root, or group/other
# writable without the sticky bit) prints ``below|MODE|OWNER|GROUP|0`` and that folder; a link
# prints its own stat line ("symbolic link"); a regular file with other names that the reader
# does not own, "hard link". Folders are checked as written and as resolved (readlink -f).
_PATH_STATE = (
    'for a in "$p" "$(readlink -f -- "${p%/*}" 2>/dev/null)/"; do q=$a; while [ -n "$q" ]; do q=${q%/*}; d=${q:-/}; '
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


def state_command(key: StateKey) -> str:
    """The POSIX sh that prints ``key``'s raw state (values quoted; never raw)."""
    kind, arg = key.kind, key.arg
    if kind in EXTRA_KINDS:
        return EXTRA_KINDS[kind][0](arg)
    if kind == "file":
        return _file_command(arg)
    if kind == "stat":
        return _stat_command(arg)
    if kind == "user":
        name = quote(check_user(arg))
        return f"getent passwd {name} && id -Gn {name}; true"
    if kind == "group":
        return f"getent group {quote(check_user(arg, 'group'))}; true"
    if kind in ("uid", "gid"):
        if not is_number(arg):
            raise ValueError(f"{kind} {arg!r} is not a number")
        return f"getent {'passwd' if kind == 'uid' else 'group'} {arg} | cut -d: -f1"
    if kind == "pkgmgr":
        return (
            "if command -v apt-get >/dev/null; then echo apt; elif command -v dnf >/dev/null; then echo dnf; "
            "elif command -v yum >/dev/null; then echo yum; fi"
        )
    if kind == "package":
        if not PACKAGE_NAME.match(arg):
            raise ValueError(f"package {arg!r}")
        name = quote(arg)
        return (
            f"if command -v dpkg-query >/dev/null; then dpkg-query -W -f='${{db:Status-Abbrev}}|${{Version}}' {name} 2>/dev/null; "  # noqa: E501 - one literal, kept whole to be read or grepped
            f"elif command -v rpm >/dev/null; then rpm -q --qf 'ii |%{{VERSION}}' {name} 2>/dev/null; fi; true"
        )
    if kind == "command":
        return f"( {arg}\n) >/dev/null 2>&1 </dev/null; echo $?"
    if kind == "systemd":
        return "[ -d /run/systemd/system ] && echo yes || echo no"
    if kind == "service":
        if not SERVICE_NAME.match(arg):
            raise ValueError(f"service {arg!r}")
        name = quote(arg)
        return f"systemctl is-active {name} 2>/dev/null || true; systemctl is-enabled {name} 2>/dev/null || echo unknown"
    if kind == "hostinfo":
        return (
            'echo "h $(hostname)"; echo "f $(hostname -f 2>/dev/null)"; '
            'for a in $(hostname -I 2>/dev/null); do echo "a $a"; done; '
            'for k in /etc/ssh/ssh_host_*_key.pub; do [ -r "$k" ] && echo "k $(cat "$k")"; done; '
            # /home's file system type, dev:inode and source: a shared /home is the same on every node.
            'echo "m $(stat -f -c %T /home 2>/dev/null) $(stat -c %d:%i /home 2>/dev/null) '
            "$(df -P /home 2>/dev/null | awk 'NR==2 {print $1}')\"; true"
        )
    raise ValueError(f"unknown fact kind {kind!r}")


def _lines(text: str) -> list[str]:
    return text.splitlines()


def parse_state(key: StateKey, text: str) -> Any:
    """Parse ``key``'s output (see :func:`state_command`); raises :class:`ParseError` when it is
    not what that command prints."""
    kind = key.kind
    lines = _lines(text)
    source = f"{kind} {key.arg}".strip()
    if kind in EXTRA_KINDS:
        return EXTRA_KINDS[kind][1](key.arg, text)
    if kind in ("file", "stat"):
        if not lines or lines[0] == "absent":
            return None
        fields = lines[0].split("|")
        if len(fields) != 5 or not re.fullmatch(r"[0-7]{1,4}", fields[1]):
            raise ParseError(source, f"unexpected stat line {lines[0][:80]!r}")
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
            except binascii.Error:
                raise ParseError(source, "file content is not base64") from None
        elif ftype == "f" and sha is not None and fields[4] == "0":
            content = b""
        return FileState(ftype, int(fields[1], 8), fields[2], fields[3], sha, content)
    if kind == "user":
        if not lines:
            return None
        parts = lines[0].split(":")
        if len(parts) != 7 or not is_number(parts[2]) or not is_number(parts[3]):
            raise ParseError(source, f"unexpected passwd entry {lines[0][:80]!r}")
        groups = tuple(lines[1].split()) if len(lines) > 1 else ()
        return UserEntry(parts[0], int(parts[2]), int(parts[3]), parts[5], parts[6], groups[1:] if groups else ())
    if kind == "group":
        if not lines:
            return None
        parts = lines[0].split(":")
        if len(parts) != 4 or not is_number(parts[2]):
            raise ParseError(source, f"unexpected group entry {lines[0][:80]!r}")
        return GroupEntry(parts[0], int(parts[2]))
    if kind in ("uid", "gid", "pkgmgr"):
        return lines[0].strip() if lines and lines[0].strip() else None
    if kind == "package":
        head = lines[0] if lines else ""
        return head.split("|", 1)[1] if head.startswith("ii") and "|" in head else None
    if kind == "command":
        if not lines or not is_number(lines[-1].strip()):
            raise ParseError(source, "no exit code")
        return int(lines[-1].strip())
    if kind == "systemd":
        return bool(lines) and lines[0] == "yes"
    if kind == "service":
        active = lines[0].strip() if lines else "unknown"
        enabled = lines[1].strip() if len(lines) > 1 else "unknown"
        return ServiceState(active or "unknown", enabled or "unknown")
    if kind == "hostinfo":
        info: dict[str, Any] = {"hostname": "", "fqdn": "", "addresses": [], "host_keys": []}
        for line in lines[:200]:
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
    raise ParseError(source, "unknown fact kind")
