"""Host key checking as OpenSSH does it: refuse unknown, changed and revoked keys.

Fabric, left alone, auto-adds any key, and paramiko's own known_hosts reader drops ``@revoked``
and ``@cert-authority`` lines. Here paramiko is given no keys at all, so every server key comes
to :class:`KnownHostsPolicy`, which decides from the entries :mod:`provision.transport.known_hosts` found
for the host (user and global files, hashed and ``[host]:port`` entries):

- a key marked ``@revoked`` is refused, always (also with ``--accept-new-host-keys``);
- a key listed for the host is accepted; another key of the same type is a CHANGED key, refused;
- an unknown key is refused (``strict``) or appended to the first user file (``accept-new``,
  never rewriting it); where only a ``@cert-authority`` line names the host, the refusal says that
  host certificates are not verified.

Messages name the host, the SHA256 fingerprint and the ``file:line`` involved, like ssh(1).
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

import paramiko

from provision.transport.known_hosts import KnownEntry, KnownHostsFiles, entries_for, hash_name, hostkey_name, known_hosts_files

_append_lock = threading.Lock()


def fingerprint(key: paramiko.PKey | bytes) -> str:
    """OpenSSH's ``SHA256:...`` fingerprint of a public key (or of its blob)."""
    digest = hashlib.sha256(key if isinstance(key, bytes) else key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _files_text(files: KnownHostsFiles) -> str:
    return ", ".join(str(p) for p in files.all) or "no known_hosts file (UserKnownHostsFile none)"


class HostKeyError(Exception):
    """A host key was refused; ``str()`` is the one-line reason."""


class HostKeyUnknown(HostKeyError):
    """The host is in no known_hosts file and new keys are not accepted."""

    def __init__(self, hostname: str, key: paramiko.PKey, files: KnownHostsFiles, other_types: list[str] = ()):
        others = f"; known_hosts has only {', '.join(other_types)} for it" if other_types else ""
        super().__init__(
            f"host key unknown: {hostname} offered {key.get_name()} {fingerprint(key)}, which is not in "
            f"{_files_text(files)}{others} (check it, then add it with ssh-keyscan or rerun with --accept-new-host-keys)"
        )


class HostKeyChanged(HostKeyError):
    """known_hosts holds a different key of the same type for this host: possible man-in-the-middle."""

    def __init__(self, hostname: str, got: paramiko.PKey, expected: KnownEntry):
        super().__init__(
            f"HOST KEY CHANGED for {hostname}: got {got.get_name()} {fingerprint(got)}, {expected.where} has "
            f"{expected.key_type} {fingerprint(expected.blob)}; refusing to connect (remove the old key "
            f"with ssh-keygen -R if the change is expected)"
        )


class HostKeyRevoked(HostKeyError):
    """The server's key is marked ``@revoked``: never accepted."""

    def __init__(self, hostname: str, key: paramiko.PKey, entry: KnownEntry):
        super().__init__(
            f"HOST KEY REVOKED: {hostname} offered {key.get_name()} {fingerprint(key)}, marked @revoked in "
            f"{entry.where}; refusing to connect"
        )


class HostCertificateNotVerified(HostKeyError):
    """Only a ``@cert-authority`` line names the host, and provision does not verify host certificates."""

    def __init__(self, hostname: str, key: paramiko.PKey, entry: KnownEntry):
        super().__init__(
            f"host key not verified: {entry.where} trusts a host certificate authority (@cert-authority) for "
            f"{hostname}, but provision does not verify host certificates; {hostname} offered plain key "
            f"{key.get_name()} {fingerprint(key)} (add it to known_hosts, e.g. with ssh-keyscan, to trust it)"
        )


def append_known_host(known_hosts: Path, hostname: str, key: paramiko.PKey, hashed: bool = False) -> None:
    """Append one ``host keytype base64`` line (hashed name with ``hashed``), never rewriting or
    truncating the file; a newline goes first when the file's last line lacks one."""
    known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    line = f"{hash_name(hostname) if hashed else hostname} {key.get_name()} {key.get_base64()}\n"
    with _append_lock:
        fd = os.open(known_hosts, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # other provision processes append too
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = "\n" + line
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def check_known(hostname: str, key: paramiko.PKey, entries: list[KnownEntry]) -> bool:
    """True when ``entries`` (those naming ``hostname``) list ``key``; False when the key is new.

    Raises :class:`HostKeyRevoked` for a key marked ``@revoked`` (whatever else lists it) and
    :class:`HostKeyChanged` when another key of the same type is listed.
    """
    blob = key.asbytes()
    for entry in entries:
        if entry.marker == "@revoked" and entry.blob == blob:
            raise HostKeyRevoked(hostname, key, entry)
    plain = [e for e in entries if e.marker is None]
    if any(e.blob == blob for e in plain):
        return True
    for entry in plain:
        if entry.key_type == key.get_name():
            raise HostKeyChanged(hostname, key, entry)
    return False


def _preferred_algorithms(key_types: list[str]) -> list[str]:
    algorithms = []
    for key_type in key_types:
        algorithms += ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] if key_type == "ssh-rsa" else [key_type]
    return list(dict.fromkeys(algorithms))


class KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """Decides on every server key of one host (paramiko holds none itself, so it always asks)."""

    def __init__(self, hostname: str, files: KnownHostsFiles, accept_new: bool):
        self.hostname = hostname
        self.files = files
        self.accept_new = accept_new
        self.entries = entries_for(hostname, files)

    def missing_host_key(self, client, hostname, key):
        """Accept a listed key; record a new one (accept-new); else raise a :class:`HostKeyError`."""
        if check_known(hostname, key, self.entries):
            return
        if self.accept_new and self.files.user:
            append_known_host(self.files.user[0], hostname, key, hashed=self.files.hash_new)
            # Said as ssh(1) says it: a key trusted from now on is never recorded silently.
            print(
                f"provision: added {hostname}'s {key.get_name()} key {fingerprint(key)} to {self.files.user[0]}",
                file=sys.stderr,
                flush=True,
            )
            return
        authorities = [e for e in self.entries if e.marker == "@cert-authority"]
        if authorities:
            raise HostCertificateNotVerified(hostname, key, authorities[0])
        raise HostKeyUnknown(hostname, key, self.files, sorted({e.key_type for e in self.entries if e.marker is None}))

    def transport_factory(self, sock, **kwargs) -> paramiko.Transport:
        """A Transport that asks the server first for the key types known for this host, as ssh does
        (else a server with several keys may offer one we do not know)."""
        transport = paramiko.Transport(sock, **kwargs)
        known = _preferred_algorithms([e.key_type for e in self.entries if e.marker is None])
        options = transport.get_security_options()
        available = list(options.key_types)
        first = [a for a in known if a in available]
        if first:
            options.key_types = first + [a for a in available if a not in first]
        # AES-GCM first (the first cipher in our list that the server also offers is used; a server
        # without it gets AES-CTR as before): with CTR, paramiko checks each packet's HMAC in Python,
        # byte by byte (a constant-time compare): about a tenth of the controller's CPU per probed host
        # (issue 28); GCM's tag is checked inside OpenSSL. OpenSSH offers GCM by default since 6.2.
        ciphers = list(options.ciphers)
        aead = [c for c in ciphers if c.endswith("-gcm@openssh.com")]
        options.ciphers = aead + [c for c in ciphers if c not in aead]
        return transport


def make_client(
    host: str, port: int, ssh_config: Mapping[str, object], known_hosts: Path | None, accept_new: bool
) -> tuple[paramiko.SSHClient, KnownHostsPolicy]:
    """An SSHClient for ``host:port`` that trusts only the host's known_hosts entries.

    The files come from ``ssh_config`` (the host's lookup), ``known_hosts`` (``--known-hosts``)
    replacing the user files. Pass ``policy.transport_factory`` to ``SSHClient.connect``.
    """
    policy = KnownHostsPolicy(hostkey_name(host, port), known_hosts_files(ssh_config, known_hosts), accept_new)
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(policy)
    return client, policy
