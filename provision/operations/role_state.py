"""Fact kinds the NFS, Anaconda and Jupyter roles need, each a command and a pure parser of
hostile output (bounded, every field checked):

- ``mount`` PATH: the filesystem mounted exactly at PATH, ``(source, fstype)`` or None;
- ``nfsd``: ``kernel`` when the kernel can serve NFS here (nfsd known and CAP_SYS_ADMIN), else ``none``;
- ``nfsmount``: what an NFS mount here lacks (kernel client, ``mount.nfs``, CAP_SYS_ADMIN), a tuple;
- ``listening``: the TCP ports listening on this host, ``{port: uid}`` (from /proc/net/tcp*);
- ``df`` PATH: free KiB on the filesystem that holds PATH (or its nearest existing parent);
- ``pidfile`` PATH: whether the process named in that pid file is alive.
"""

from __future__ import annotations

import re

from provision.errors import ParseError
from provision.facts.registry import Fact
from provision.operations.base import check_path, shell_path
from provision.text import is_number, shown_value

_MAX_LINES = 20000
_CAP_SYS_ADMIN = 21


def _mount_command(path: str) -> str:
    # /proc/self/mountinfo field 5 is the mount point (octal escapes), after " - ": fstype source.
    program = "'$5 == p { for (i = 7; i <= NF; i++) if ($i == \"-\") { print $(i+2), $(i+1) } }'"
    return f"awk -v p={shell_path(check_path(path))} {program} /proc/self/mountinfo | tail -n 1"


def _parse_mount(path: str, text: str) -> tuple[str, str] | None:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    parts = lines[-1].split()
    if len(parts) != 2 or len(lines[-1]) > 4096:
        raise ParseError(f"mount {path}", f"unexpected mountinfo line {shown_value(lines[-1][:80])}")
    return parts[0], parts[1]


def _nfsd_command() -> str:
    # The kernel server needs the nfsd file system (registered, or a module this system can load)
    # AND the privilege to run it: a container shares the host's kernel but, unprivileged, lacks
    # CAP_SYS_ADMIN; one with CAP_SYS_ADMIN (for systemd) still has /proc/fs read-only, where
    # nfs-server.service must mount nfsd ("A dependency job for nfs-server.service failed", issue
    # 34's quick start on systemd nodes). An empty /proc/fs/nfsd folder says nothing: it is there
    # without the file system.
    return (
        "k=none; if grep -qw nfsd /proc/filesystems 2>/dev/null || modinfo nfsd >/dev/null 2>&1; "
        "then c=$(awk '/^CapEff:/ {print $2}' /proc/self/status); "
        f"[ $(( 0x${{c:-0}} >> {_CAP_SYS_ADMIN} & 1 )) -eq 1 ] && k=kernel; "
        "awk '$5 == \"/proc/fs\" && $6 ~ /(^|,)ro(,|$)/ { f = 1 } END { exit !f }' /proc/self/mountinfo && k=none; fi; echo $k"
    )


def _parse_word(kind: str, words: tuple[str, ...], takes_arg: bool = True):
    def parse_text(text: str) -> str:
        word = text.strip().splitlines()[0].strip() if text.strip() else ""
        if word not in words:
            raise ParseError(kind, f"unexpected output {shown_value(word[:40])}")
        return word

    def parse_of(_arg: str, text: str) -> str:
        return parse_text(text)

    return parse_of if takes_arg else parse_text


def _nfsmount_command() -> str:
    return (
        "grep -qw nfs4 /proc/filesystems 2>/dev/null || grep -qw nfs /proc/filesystems 2>/dev/null "
        "|| echo 'no kernel NFS client'; "
        "command -v mount.nfs >/dev/null 2>&1 || [ -x /sbin/mount.nfs ] || echo 'no mount.nfs (nfs-common)'; "
        "echo \"cap $(awk '/^CapEff:/ {print $2}' /proc/self/status)\""
    )


def _parse_nfsmount(text: str) -> tuple[str, ...]:
    missing = []
    for line in text.splitlines()[:10]:
        line = line.strip()
        if line in ("no kernel NFS client", "no mount.nfs (nfs-common)"):
            missing.append(line)
        elif line.startswith("cap "):
            value = line[4:].strip()
            if not re.fullmatch(r"[0-9a-fA-F]{1,16}", value):
                raise ParseError("nfsmount", f"unexpected capability mask {shown_value(value[:20])}")
            if not int(value, 16) >> _CAP_SYS_ADMIN & 1:
                missing.append("no privilege to mount (CAP_SYS_ADMIN)")
        elif line:
            raise ParseError("nfsmount", f"unexpected line {shown_value(line[:60])}")
    return tuple(missing)


_LISTENING_COMMAND = "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; true"


def parse_listening(text: str) -> dict[int, int]:
    """``{port: uid}`` of sockets in state LISTEN (0A) in /proc/net/tcp and tcp6 output."""
    ports: dict[int, int] = {}
    for line in text.splitlines()[:_MAX_LINES]:
        fields = line.split()
        if len(fields) < 8 or fields[0] == "sl" or fields[3] != "0A":
            continue
        local = fields[1].rpartition(":")[2]
        if not re.fullmatch(r"[0-9A-Fa-f]{4}", local) or not is_number(fields[7]):
            raise ParseError("listening", f"unexpected /proc/net/tcp line {shown_value(line[:80])}")
        ports.setdefault(int(local, 16), int(fields[7]))
    return ports


def _df_command(path: str) -> str:
    word = shell_path(check_path(path))
    return f'p={word}; while [ ! -e "$p" ] && [ "$p" != / ]; do p=$(dirname "$p"); done; df -Pk "$p" | tail -n 1'


def _parse_df(path: str, text: str) -> int:
    lines = [line for line in text.splitlines() if line.strip()]
    fields = lines[-1].split() if lines else []
    if len(fields) < 6 or not is_number(fields[3]):
        raise ParseError(f"df {path}", f"unexpected df line {shown_value((lines[-1] if lines else '')[:80])}")
    return int(fields[3])


def _pidfile_command(path: str) -> str:
    word = shell_path(check_path(path))
    return f'if [ -r {word} ] && kill -0 "$(cat {word})" 2>/dev/null; then echo alive; else echo dead; fi'


MOUNT = Fact("mount", (), _mount_command, "what is mounted on a path", _parse_mount)
NFSD = Fact(
    "nfsd", (), _nfsd_command(), "whether the kernel NFS server can run", _parse_word("nfsd", ("kernel", "none"), takes_arg=False)
)
NFSMOUNT = Fact("nfsmount", (), _nfsmount_command(), "whether an NFS mount can be made", _parse_nfsmount)
LISTENING = Fact("listening", (), _LISTENING_COMMAND, "the TCP ports listening", parse_listening)
DF = Fact("df", (), _df_command, "free kilobytes on a path's file system", _parse_df)
PIDFILE = Fact(
    "pidfile", (), _pidfile_command, "whether a pid file's process is alive", _parse_word("pidfile", ("alive", "dead"))
)
