"""Run one command on one host: over SSH (Fabric/paramiko) or, for ``localhost``, locally.

SSH honours ``~/.ssh/config`` (Fabric reads it: HostName, User, Port, IdentityFile, ProxyJump),
checks host keys with :mod:`provision.transport.hostkeys` (also on ProxyJump hops), and reports every
failure as a :class:`HostFailure` with a kind and a one-line message.

Time limits: ``connect_timeout`` (a float; Fabric's own handling truncates it to an int, so
0.5 s became "no limit") bounds, on every hop, the TCP connect, the server's banner, the key
exchange and opening a channel (also the ProxyJump hop's forwarded channel);
``command_timeout`` bounds the remote command.

Cost: Fabric sets the connection up (ssh_config, ProxyJump, our host key policy on every hop);
the command then runs on the paramiko channel directly, without invoke's runner (its reader
threads and polling loops doubled the controller's CPU per host). Private keys are parsed once
per file version and shared by every connection of the process.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import threading
from functools import lru_cache
from pathlib import Path

import fabric
import paramiko

from provision.inventory.model import Host
from provision.transport.channel import ChannelFailure, CommandTimeout, run_on_channel
from provision.transport.hostkeys import HostKeyError, make_client
from provision.transport.options import CommandResult, HostFailure, SshOptions

# paramiko's transport thread logs a traceback for each failed handshake (no handler: Python
# prints it on stderr); every failure reaches the user as one HostFailure line instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class _Connection(fabric.Connection):
    """A Fabric Connection that leaves the shared Config alone.

    Fabric's ``__init__`` assigns ``self.inline_ssh_env``; not being a real attribute, the value
    went into the Config all connections share (:func:`_fabric_config`), whose re-merge empties
    it for a moment: another thread then failed with "No attribute or config key found for
    'gateway'". As a class attribute it is a real one, set on the connection itself.
    """

    inline_ssh_env = None
    provision_key_files: tuple[str, ...] = ()  # the key files given, named in an authentication failure


@lru_cache(maxsize=4)
def _fabric_config(ssh_config: Path | None) -> fabric.Config:
    if ssh_config is not None:
        return fabric.Config(runtime_ssh_path=str(ssh_config))
    return fabric.Config()


def _check_key_file(key: str | None) -> str | None:
    if key is None:
        return None
    path = os.path.expanduser(key)
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise HostFailure("key", f"cannot read key file {path}: {error.strerror}") from None
    return path


_key_cache: dict[tuple, paramiko.PKey] = {}
_key_cache_lock = threading.Lock()


def _new_key_cache_lock() -> None:  # a forked worker: the parent's lock may have been held at the fork
    global _key_cache_lock
    _key_cache_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_key_cache_lock)


def cached_private_key(path: str) -> paramiko.PKey | None:
    """The private key at ``path`` (with its ``-cert.pub`` if any), parsed once per file version
    (path, inode, size, mtime) and shared across connections; None when it cannot be loaded without
    a passphrase or is not a key (paramiko then tries the file itself, as before)."""
    try:
        info = os.stat(path)
        cert = os.stat(path + "-cert.pub")
    except FileNotFoundError:
        cert = None
    except OSError:
        return None
    version = (path, info.st_ino, info.st_size, info.st_mtime_ns, cert and (cert.st_ino, cert.st_size, cert.st_mtime_ns))
    with _key_cache_lock:
        key = _key_cache.get(version)
    if key is None:
        try:
            key = paramiko.PKey.from_path(path)
        except Exception:  # noqa: BLE001 - encrypted, unknown type, unreadable: paramiko's own path decides
            return None
        with _key_cache_lock:
            if len(_key_cache) > 64:  # bounded: rewritten key files must not grow it forever
                _key_cache.clear()
            _key_cache[version] = key
    return key


def _use_cached_key(connect_kwargs: dict) -> dict:
    """Give paramiko the first key file as an already parsed ``pkey`` (tried first, as the file
    would have been); the other files stay key files, tried after it in their order."""
    files = connect_kwargs.get("key_filename") or []
    files = [files] if isinstance(files, str) else list(files)
    if not files or "pkey" in connect_kwargs or connect_kwargs.get("passphrase") or connect_kwargs.get("password"):
        return connect_kwargs
    key = cached_private_key(os.path.expanduser(files[0]))
    if key is None:
        return connect_kwargs
    return {**connect_kwargs, "pkey": key, "key_filename": files[1:]}


def _connect_limits(options: SshOptions) -> dict[str, float]:
    """paramiko.SSHClient.connect's time limits, as floats: TCP connect (and key exchange),
    server banner, channel opening (ProxyJump's forwarded channel, the command's session)."""
    limit = float(options.connect_timeout)
    return {"timeout": limit, "banner_timeout": limit, "channel_timeout": limit}


def _secure_hop(hop: fabric.Connection, options: SshOptions) -> None:
    """Install provision's host key policy and time limits on one hop (the target or a ProxyJump hop)."""
    client, policy = make_client(hop.host, hop.port, hop.ssh_config, options.known_hosts, options.accept_new_host_keys)
    hop.client = client
    # Fabric would pass int(connect_timeout) (0.5 -> 0 -> no limit) and gives a ProxyJump hop none
    # at all; our own float limits go straight to SSHClient.connect instead.
    hop.connect_timeout = None
    if isinstance(hop, _Connection):  # a real attribute there (a hop's would go into the shared Config)
        files = hop.connect_kwargs.get("key_filename") or []
        hop.provision_key_files = (files,) if isinstance(files, str) else tuple(files)
    hop.connect_kwargs = {
        **_use_cached_key(hop.connect_kwargs),
        **_connect_limits(options),
        "transport_factory": policy.transport_factory,
    }


def open_connection(host: Host, options: SshOptions) -> fabric.Connection:
    """A Fabric Connection (not yet opened) with provision's host key policy and time limits
    installed on it and on every ProxyJump hop."""
    key = _check_key_file(host.key)
    connect_kwargs = {"key_filename": [key]} if key else {}
    connection = _Connection(
        host=host.address or host.name,
        user=host.user,
        port=host.port,
        config=_fabric_config(options.ssh_config),
        connect_timeout=1,  # replaced in _secure_hop; given so Fabric does not read ssh_config's
        connect_kwargs=connect_kwargs,
    )
    hop = connection
    while isinstance(hop, fabric.Connection):  # Fabric installs AutoAddPolicy on each hop
        _secure_hop(hop, options)
        hop = hop.gateway
    return connection


# What paramiko raises, unchained, when a limit passed: the key exchange did not finish in time
# (connect then finds no session), or a channel (a ProxyJump hop's forwarded one) did not open.
_TIMEOUT_MESSAGES = ("No existing session", "Timeout opening channel.")


def _timed_out(error: BaseException) -> bool:
    """A paramiko error caused by a time limit: the banner read timed out (the timeout is chained),
    or one of :data:`_TIMEOUT_MESSAGES`."""
    seen = error
    for _ in range(5):
        if isinstance(seen, (socket.timeout, TimeoutError)):
            return True
        seen = seen.__cause__ or seen.__context__
        if seen is None:
            break
    return isinstance(error, paramiko.SSHException) and str(error) in _TIMEOUT_MESSAGES


def _command_timed_out(options: SshOptions) -> HostFailure:
    return HostFailure("timeout", f"command still running after {options.command_timeout:g}s")


_DEFAULT_KEYS = ("id_rsa", "id_ecdsa", "id_ed25519", "id_dsa")  # what paramiko looks for in ~/.ssh


def auth_detail(connection: fabric.Connection | None) -> str:
    """``user mpi, keys tried: ~/.ssh/a, ~/.ssh/id_ed25519, ssh-agent`` for an authentication
    failure: the login name and every key source paramiko tries, in its order."""
    if connection is None:
        return ""
    keys = list(getattr(connection, "provision_key_files", []))
    if connection.connect_kwargs.get("look_for_keys", True):
        home = Path("~/.ssh")
        keys += [str(home / name) for name in _DEFAULT_KEYS if (home / name).expanduser().is_file()]
    if connection.connect_kwargs.get("allow_agent", True) and os.environ.get("SSH_AUTH_SOCK"):
        keys.append("ssh-agent")
    tried = ", ".join(dict.fromkeys(keys)) or "none (no IdentityFile, no ~/.ssh/id_* file, no ssh-agent)"
    user = connection.user
    return f" as user {user} (keys tried: {tried}); is the matching public key in ~{user}/.ssh/authorized_keys?"


def _lost_attribute(error: AttributeError, options: SshOptions, connection) -> HostFailure:
    """Issue 34: a property of fabric's Connection that fails inside (its SSH client or transport
    gone while a loaded machine set the connection up) surfaces as invoke's "No attribute or config
    key found for 'X'" with every attribute of a Connection listed. The reason is the error that
    was being handled then (a timeout, a lost socket), when there is one; else one line that says
    the connection was lost, never the list."""
    seen, cause = set(), error.__cause__ or error.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, (OSError, EOFError, paramiko.SSHException, HostFailure, CommandTimeout, ChannelFailure)):
            return describe_failure(cause, options, connection)  # invoke's own lookups (KeyError) are passed over
        cause = cause.__cause__ or cause.__context__
    name = re.search(r"found for '([^']{1,60})'", str(error))
    what = f" (its {name.group(1)} was gone)" if name else ""
    return HostFailure("unreachable", f"the SSH connection was lost while it was being set up{what}")


def describe_failure(error: BaseException, options: SshOptions, connection: fabric.Connection | None = None) -> HostFailure:
    """Turn any connection or command error into a :class:`HostFailure` with a kind and one line
    (an authentication failure names ``connection``'s user and the keys tried)."""
    if isinstance(error, HostFailure):
        return error
    if isinstance(error, AttributeError) and "No attribute or config key found" in str(error):
        return _lost_attribute(error, options, connection)
    if isinstance(error, CommandTimeout):
        return _command_timed_out(options)
    if isinstance(error, ChannelFailure):
        return HostFailure("ssh", str(error))
    if isinstance(error, HostKeyError):
        return HostFailure("hostkey", str(error))
    if isinstance(error, paramiko.BadHostKeyException):  # not raised with our policy; kept one line anyway
        return HostFailure("hostkey", f"HOST KEY CHANGED for {error.hostname}; refusing to connect")
    if isinstance(error, paramiko.AuthenticationException):
        return HostFailure("auth", f"authentication failed: {error}{auth_detail(connection)}")
    if isinstance(error, socket.gaierror):
        return HostFailure("unreachable", f"cannot resolve host name: {error.strerror}")
    if isinstance(error, (socket.timeout, TimeoutError)) or (isinstance(error, paramiko.SSHException) and _timed_out(error)):
        return HostFailure("timeout", f"no SSH answer within {options.connect_timeout:g}s")
    if isinstance(error, paramiko.ChannelException):  # a ProxyJump hop could not reach the next one
        return HostFailure("unreachable", f"the jump host could not connect onwards: {error.text}")
    if isinstance(error, paramiko.ssh_exception.NoValidConnectionsError):
        return HostFailure("unreachable", "connection refused" if "refused" in str(error).lower() else str(error))
    if isinstance(error, (ConnectionError, OSError)):
        return HostFailure("unreachable", error.strerror or str(error))
    if isinstance(error, paramiko.SSHException):
        return HostFailure("ssh", f"SSH error: {error}")
    return HostFailure("ssh", f"{type(error).__name__}: {error}")


def run_command(host: Host, command: str, options: SshOptions, stdin: str | bytes | None = None) -> CommandResult:
    """Run ``command`` (already safely built; see shlex.quote) on ``host``, ``stdin`` written to
    its standard input, which is then closed (with no ``stdin``, closed at once, like ``ssh -n``).

    The command's stdin is ``stdin`` then end-of-file, or closed at once (as ``ssh -n``) when
    None. A non-zero exit is a result, not a failure. Raises :class:`HostFailure` when the host
    cannot be reached, refuses us, or the command outlives ``options.command_timeout``.
    """
    data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
    if host.is_local:
        try:
            done = subprocess.run(["sh", "-c", command], capture_output=True, timeout=options.command_timeout, input=data)
        except subprocess.TimeoutExpired:
            raise _command_timed_out(options) from None
        return CommandResult(done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"), done.returncode)
    connection = None
    try:
        connection = open_connection(host, options)
        connection.open()
        return run_on_connection(connection, command, data, options)
    except Exception as error:  # noqa: BLE001 - every failure becomes one line for this host
        raise describe_failure(error, options, connection) from None
    finally:
        if connection is not None:
            connection.close()


def run_on_connection(
    connection: fabric.Connection, command: str, data: bytes, options: SshOptions, timeout: float | None = None
) -> CommandResult:
    """Run ``command`` on an open ``connection``'s own channel (no invoke runner: half the CPU),
    ``data`` on its stdin then EOF; used once per probe and for every round trip of a setup
    session. Raises what :func:`describe_failure` turns into one line."""
    transport = connection.client.get_transport()
    if transport is None or not transport.is_active():
        raise HostFailure("unreachable", "connection lost")
    stdout, stderr, code = run_on_channel(
        transport, command, data, timeout or options.command_timeout, float(options.connect_timeout)
    )
    return CommandResult(stdout.decode(errors="replace"), stderr.decode(errors="replace"), code)
