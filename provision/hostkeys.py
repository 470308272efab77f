"""Host key checking as OpenSSH does it: refuse unknown and changed keys by default.

Fabric, left alone, auto-adds any key. Here an unknown key is refused (``strict``) or recorded
(``accept-new``: appended to known_hosts, never rewriting the file); a changed key is always
refused. Messages name the host and the SHA256 fingerprint, like ssh(1).
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import threading
from pathlib import Path

import paramiko

DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
_append_lock = threading.Lock()


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's ``SHA256:...`` fingerprint of a public key."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class HostKeyError(Exception):
    """A host key was refused; ``str()`` is the one-line reason."""


class HostKeyUnknown(HostKeyError):
    """The host is not in known_hosts and new keys are not accepted."""

    def __init__(self, hostname: str, key: paramiko.PKey, known_hosts: Path):
        super().__init__(
            f"host key unknown: {key.get_name()} {fingerprint(key)} is not in {known_hosts} "
            f"(check it, then add it with ssh-keyscan or rerun with --accept-new-host-keys)"
        )


class HostKeyChanged(HostKeyError):
    """known_hosts holds a different key for this host: possible man-in-the-middle."""

    def __init__(self, hostname: str, got: paramiko.PKey, expected: paramiko.PKey, known_hosts: Path):
        super().__init__(
            f"HOST KEY CHANGED: got {got.get_name()} {fingerprint(got)}, {known_hosts} has "
            f"{expected.get_name()} {fingerprint(expected)}; refusing to connect (remove the old key "
            f"with ssh-keygen -R if the change is expected)"
        )


def append_known_host(known_hosts: Path, hostname: str, key: paramiko.PKey) -> None:
    """Append one ``host keytype base64`` line (never rewrites or truncates the file)."""
    known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
    with _append_lock:
        fd = os.open(known_hosts, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # other provision processes append too
            os.write(fd, line.encode())
        finally:
            os.close(fd)


class StrictPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse any key not in known_hosts."""

    def __init__(self, known_hosts: Path):
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):
        """Refuse: raise :class:`HostKeyUnknown` naming the key's fingerprint."""
        raise HostKeyUnknown(hostname, key, self.known_hosts)


class AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
    """OpenSSH's ``StrictHostKeyChecking=accept-new``: record unknown keys, refuse changed ones."""

    def __init__(self, known_hosts: Path):
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):
        """Append the key to known_hosts and trust it for this connection."""
        append_known_host(self.known_hosts, hostname, key)
        client.get_host_keys().add(hostname, key.get_name(), key)


def make_client(known_hosts: Path, accept_new: bool) -> paramiko.SSHClient:
    """An SSHClient that trusts only ``known_hosts`` and applies the chosen policy."""
    client = paramiko.SSHClient()
    path = Path(known_hosts).expanduser()
    if path.exists():
        client.load_system_host_keys(str(path))  # read-only: paramiko never saves these
    client.set_missing_host_key_policy(AcceptNewPolicy(path) if accept_new else StrictPolicy(path))
    return client
