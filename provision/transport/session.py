"""An open session to one host, reused for every command of a run: ``run(command, stdin)``,
and SFTP uploads into a private folder (``make_private_dir``, ``put_file``). Built on
:func:`provision.transport.connection.open_connection` (same ssh config,
strict host keys, ProxyJump); ``localhost`` runs locally with no SSH.

A process keeps at most :func:`open_limit` sessions connected at once: past it, opening one closes
the least recently used idle one, which connects again (its host key checked again) if it is
used again. Each connection holds a socket, a paramiko thread and its buffers; a run keeps its
hosts' sessions between plays, and at 1024 hosts that was a descriptor and a thread per host,
past RLIMIT_NOFILE's usual soft limit of 1024 (issue 37).

Stdin is written to the remote command and then closed, so scripts and secrets (a sudo
password) travel on stdin, never on a command line.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import resource
import secrets
import shutil
import socket
import stat
import subprocess
import threading
import time
from collections import OrderedDict

from provision.inventory.model import Host
from provision.transport.channel import ChannelFailure, CommandTimeout, sftp_put
from provision.transport.connection import describe_failure, open_connection, run_on_connection
from provision.transport.options import CommandResult, HostFailure, SshOptions

# Connections kept open at most, whatever RLIMIT_NOFILE allows (64: the default --forks). An idle
# paramiko connection is not free: its thread wakes ten times a second (a 0.1 s socket timeout),
# about 2 ms of CPU per second each; a no-change run of 1024 simulated hosts took 26.8 s of CPU
# with 256 kept open, 18.5 s with 64 (issue 37). Reconnecting costs one handshake (~10 ms).
OPEN_MOST = 64


def open_limit() -> int:
    """How many sessions a process keeps connected at once: a quarter of the open files it may
    have (RLIMIT_NOFILE's soft limit), at least 16 and at most :data:`OPEN_MOST`; sessions in use
    are never closed, so more are open while more commands run at once (``--forks``).

    >>> 16 <= open_limit() <= OPEN_MOST
    True
    """
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return OPEN_MOST if soft == resource.RLIM_INFINITY else max(16, min(OPEN_MOST, soft // 4))


class _Connected:
    """The sessions of this process that hold a connection, the least recently used first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: OrderedDict[int, Session] = OrderedDict()

    def used(self, session: Session) -> None:
        with self._lock:
            self._sessions[id(session)] = session
            self._sessions.move_to_end(id(session))

    def opened(self, session: Session) -> None:
        """``session`` connected: past :func:`open_limit`, close the least recently used idle ones
        (a session whose lock is held is running a command: left alone)."""
        self.used(session)
        with self._lock:
            over = len(self._sessions) - open_limit()
            oldest = [s for s in self._sessions.values() if s is not session] if over > 0 else []
        for other in oldest:
            if over <= 0:
                break
            if other._lock.acquire(blocking=False):
                try:
                    other.close()
                finally:
                    other._lock.release()
                over -= 1

    def closed(self, session: Session) -> None:
        with self._lock:
            self._sessions.pop(id(session), None)

    def __len__(self) -> int:
        return len(self._sessions)


CONNECTED = _Connected()
if hasattr(os, "register_at_fork"):  # a forked worker holds none of its parent's connections
    os.register_at_fork(after_in_child=lambda: CONNECTED.__init__())


class Session:
    """One host's connection, opened on first use and closed by :meth:`close` (or ``with``); it
    may be closed meanwhile when too many are open (:func:`open_limit`), and connects again on
    its next use."""

    def __init__(self, host: Host, options: SshOptions):
        self.host, self.options = host, options
        self._connection = None
        self.round_trips = 0
        self._lock = threading.Lock()
        self._verified: str | None = None  # of the last connection, kept when it is closed
        self._address: str | None = None
        self._failed_ahead: HostFailure | None = None  # open_ahead's failure, raised by the first use
        self._abandoned = False
        self._ahead = False  # open_ahead was called: it is connecting, or has

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        """Connect (once); raises :class:`HostFailure`. A connection :meth:`open_ahead` made that
        died before its first command (idle while the controller checked, or while a password
        was asked) is made again."""
        if self._failed_ahead is not None:
            failure, self._failed_ahead = self._failed_ahead, None
            raise failure
        if self._connection is not None and self.round_trips <= 1 and not _active(self._connection):
            self.close()
        if self.host.is_local or self._connection is not None:
            return
        connection = None
        try:
            connection = open_connection(self.host, self.options)
            connection.open()
        except Exception as error:  # noqa: BLE001 - every failure becomes one line for this host
            raise describe_failure(error, self.options, connection) from None
        self._connection = connection
        self._verified, self._address = self.verified_host_key(), self.connected_address()
        CONNECTED.opened(self)

    def open_ahead(self) -> None:
        """Start connecting in a background thread and return at once, so that the handshake (TCP,
        key exchange, the host key checked, authentication) overlaps the controller's own work
        before the first command; the first :meth:`run` waits for it. A failure is kept and raised
        by that first use, as if it had connected then. No command runs; :meth:`abandon` closes
        the connection when no command is to follow. Where no thread can be started, the host
        connects on its first use, as without this.

            session.open_ahead()      # returns at once
            ...                       # the controller checks its playbooks meanwhile
            session.run("true")       # waits for the handshake, then runs
        """
        if self.host.is_local or self._connection is not None or self._ahead:
            return
        self._ahead = True
        self._lock.acquire()  # taken here, released by the thread: a run() called meanwhile waits for it

        def connect() -> None:
            try:
                self.open()
            except HostFailure as failure:
                self._failed_ahead = failure
            finally:
                self._lock.release()
                self._close_if_abandoned()  # after the release: abandon() may have found the lock taken

        thread = threading.Thread(target=connect, name=f"connect {self.host.name}", daemon=True)
        try:
            thread.start()
        except BaseException as error:
            self._ahead = False
            self._lock.release()
            if not isinstance(error, RuntimeError):  # RuntimeError: no thread to be had; connect on first use
                raise

    def abandon(self, wait: float = 0.0) -> None:
        """Close a connection :meth:`open_ahead` opened when no command is to follow. One still
        being made is waited for up to ``wait`` seconds (so that it ends as a clean logout, not a
        login cut off half way), else it is closed by its thread once made."""
        self._abandoned = True
        if self._lock.acquire(timeout=wait) if wait > 0 else self._lock.acquire(blocking=False):
            self._lock.release()
        self._close_if_abandoned()

    def _close_if_abandoned(self) -> None:
        # Either side (abandon(), or the handshake's thread once done) closes it, whichever finds
        # the lock free last: the other may have looked while it was taken.
        if self._abandoned and self._lock.acquire(blocking=False):
            try:
                self.close()
            finally:
                self._lock.release()

    def run(self, command: str, stdin: bytes | str | None = None, timeout: float | None = None) -> CommandResult:
        """Run ``command`` with ``stdin`` fed then closed. A non-zero exit is a result; a broken
        connection or timeout raises :class:`HostFailure`."""
        data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        timeout = timeout or self.options.command_timeout
        with self._lock:
            self.round_trips += 1
            if self.host.is_local:
                return self._run_local(command, data, timeout)
            self.open()
            CONNECTED.used(self)
            try:
                return self._run_remote(command, data, timeout)
            except HostFailure:
                raise
            except Exception as error:  # noqa: BLE001
                raise describe_failure(error, self.options) from None

    def _run_local(self, command: str, data: bytes, timeout: float) -> CommandResult:
        try:
            done = subprocess.run(["sh", "-c", command], input=data, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HostFailure("timeout", f"command still running after {timeout:g}s") from None
        return CommandResult(done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"), done.returncode)

    def _run_remote(self, command: str, data: bytes, timeout: float) -> CommandResult:
        return run_on_connection(self._connection, command, data, self.options, timeout)

    def verified_host_key(self) -> str | None:
        """``type base64`` of the host key this connection's key exchange verified against the
        known_hosts files (None for localhost or when never connected): what a node reports about
        its own keys is believed only when it includes this one. That of the last connection when
        this one was closed since (:func:`open_limit`)."""
        if self._connection is None:
            return self._verified
        transport = self._connection.client.get_transport()
        key = transport.get_remote_server_key() if transport is not None else None
        return f"{key.get_name()} {key.get_base64()}" if key is not None else None

    def connected_address(self) -> str | None:
        """The address this connection reached the host at, as the controller itself knows it (None
        for localhost or when not connected): the peer address of the controller's own TCP socket
        (a name in the inventory or ssh_config resolved and connected to; IPv4 in IPv6 form and a
        link-local scope made plain). Through a ProxyJump hop or a ProxyCommand the controller
        holds no socket to the host: what it asked the last hop to connect to (the inventory's
        address, or ssh_config's HostName) is all it knows. Never what the node says of itself;
        the host key was verified on this same connection before any command ran. That of the
        last connection when this one was closed since (:func:`open_limit`)."""
        if self._connection is None:
            return self._address
        transport = self._connection.client.get_transport()
        if transport is None:
            return None
        sock = getattr(transport, "sock", None)
        if isinstance(sock, socket.socket):
            try:
                return plain_address(sock.getpeername()[0])
            except (OSError, IndexError, TypeError):
                return None
        host = str(self._connection.host)
        try:  # the inventory's [fd00::4a] (its ADDRESS allows brackets) as an export line names it
            return plain_address(host.removeprefix("[").removesuffix("]"))
        except ValueError:
            return host or None

    # -- files over SFTP (issue 15: never inside a script) ---------------------------------------
    def make_private_dir(self, parent: str) -> str:
        """A new folder ``PARENT/provision-upload.<random>``, mode 0700, the login user's (made
        with an exclusive mkdir: an existing path of that name, a planted link, fails); its path."""
        name = f"{parent.rstrip('/')}/provision-upload.{secrets.token_hex(8)}"
        if self.host.is_local:
            os.mkdir(name, 0o700)
            return name
        with self._lock:
            try:
                sftp = self._sftp()
                sftp.mkdir(name, 0o700)
                sftp.chmod(name, 0o700)
                made = sftp.lstat(name)
            except HostFailure:
                raise
            except Exception as error:  # noqa: BLE001
                raise HostFailure("ssh", f"cannot make a private upload folder in {parent} over SFTP: {error}") from None
        if not stat.S_ISDIR(made.st_mode or 0) or (made.st_mode or 0) & 0o077:
            raise HostFailure("ssh", f"upload folder {name} is not a private folder after mkdir")
        return name

    def put_file(self, local: str, remote: str, sha256: str) -> None:
        """Stream the controller file ``local`` to ``remote`` (a new file, 0600) over SFTP, hashing
        what is sent (:func:`provision.transport.channel.sftp_put`); within the command timeout."""
        deadline = time.monotonic() + self.options.command_timeout
        try:
            if self.host.is_local:
                digest = hashlib.sha256()
                with open(local, "rb") as source, open(os.open(remote, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
                    while chunk := source.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
                if digest.hexdigest() != sha256:
                    raise ChannelFailure(f"{local} changed since it was checked")
                return
            with self._lock:
                sftp_put(self._sftp(), local, remote, sha256, deadline)
        except HostFailure:
            raise
        except CommandTimeout:
            raise HostFailure("timeout", f"sending {local} still running after {self.options.command_timeout:g}s") from None
        except (ChannelFailure, OSError) as error:
            raise HostFailure("ssh", f"cannot send {local} to {remote}: {error}") from None
        except Exception as error:  # noqa: BLE001
            raise describe_failure(error, self.options) from None

    def remove_private_dir(self, path: str) -> None:
        """Remove an upload folder and the files left in it (best effort: the round trip's own
        step moves the files it uses away)."""
        try:
            if self.host.is_local:
                shutil.rmtree(path, ignore_errors=True)
                return
            with self._lock:
                sftp = self._sftp()
                for name in sftp.listdir(path):
                    sftp.remove(f"{path}/{name}")
                sftp.rmdir(path)
        except Exception:  # noqa: BLE001, S110 - a folder left behind in /var/tmp is private (0700) and harmless
            pass

    def _sftp(self):
        """The connection's SFTP client (opened once), under the session lock."""
        self.open()
        try:
            sftp = self._connection.sftp()
        except Exception as error:  # noqa: BLE001
            raise HostFailure("ssh", f"SFTP is not available on this host (sshd's sftp subsystem): {error}") from None
        sftp.get_channel().settimeout(self.options.command_timeout)
        return sftp

    def close(self) -> None:
        """Close the connection (idempotent); the next use connects again."""
        if self._connection is not None:
            try:
                self._connection.close()
            finally:
                self._connection = None
                CONNECTED.closed(self)


def abandon_all(sessions, wait: float = 0.0) -> None:
    """:meth:`Session.abandon` each of ``sessions`` (a test double without it: closed), waiting
    up to ``wait`` seconds in all for handshakes under way to end cleanly."""
    deadline = time.monotonic() + wait
    for session in sessions:
        if hasattr(session, "abandon"):
            session.abandon(max(0.0, deadline - time.monotonic()))
        else:
            session.close()


def _active(connection) -> bool:
    """Whether ``connection``'s SSH transport is still up (a test double without one: assumed)."""
    transport = connection.client.get_transport()
    is_active = getattr(transport, "is_active", None)
    return transport is not None and (is_active is None or bool(is_active()))


def plain_address(peer: str) -> str:
    """A socket's peer address as an NFS export or known_hosts line names it:
    ``plain_address("::ffff:10.0.0.7") == "10.0.0.7"``, ``plain_address("fe80::1%eth0") == "fe80::1"``."""
    address = ipaddress.ip_address(peer.split("%", 1)[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)
