"""An open session to one host, reused for every command of a run: ``run(command, stdin)``,
``put`` and ``get``. Built on :func:`provision.connection.open_connection` (same ssh config,
strict host keys, ProxyJump); ``localhost`` runs locally with no SSH.

Stdin is written to the remote command and then closed, so scripts and secrets (a sudo
password) travel on stdin, never on a command line.
"""

from __future__ import annotations

import base64
import shlex
import subprocess
import threading

from provision.connection import CommandResult, HostFailure, SshOptions, describe_failure, open_connection, run_on_connection
from provision.inventory import Host


class Session:
    """One host's connection, opened on first use and closed by :meth:`close` (or ``with``)."""

    def __init__(self, host: Host, options: SshOptions):
        self.host, self.options = host, options
        self._connection = None
        self.round_trips = 0
        self._lock = threading.Lock()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        """Connect (once); raises :class:`HostFailure`."""
        if self.host.is_local or self._connection is not None:
            return
        connection = None
        try:
            connection = open_connection(self.host, self.options)
            connection.open()
        except Exception as error:  # noqa: BLE001 - every failure becomes one line for this host
            raise describe_failure(error, self.options, connection) from None
        self._connection = connection

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

    def put(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` on the host (as the login user) via ``cat``."""
        result = self.run(f"cat > {shlex.quote(path)}", data)
        if result.exit_code != 0:
            raise HostFailure("ssh", f"cannot write {path}: {result.stderr.strip()[:200]}")

    def get(self, path: str) -> bytes:
        """Read ``path`` from the host (as the login user)."""
        result = self.run(f"base64 < {shlex.quote(path)}")
        if result.exit_code != 0:
            raise HostFailure("ssh", f"cannot read {path}: {result.stderr.strip()[:200]}")
        return base64.b64decode("".join(result.stdout.split()))

    def verified_host_key(self) -> str | None:
        """``type base64`` of the host key this connection's key exchange verified against the
        known_hosts files (None for localhost or when not connected): what a node reports about
        its own keys is believed only when it includes this one."""
        transport = self._connection.client.get_transport() if self._connection is not None else None
        key = transport.get_remote_server_key() if transport is not None else None
        return f"{key.get_name()} {key.get_base64()}" if key is not None else None

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._connection is not None:
            try:
                self._connection.close()
            finally:
                self._connection = None
