"""Connection: local runs, failure descriptions. (SSH itself is exercised on the sshd cluster.)"""

import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import invoke
import paramiko
import pytest

from provision.inventory.model import Host
from provision.transport import connection as connection_module
from provision.transport.connection import describe_failure, open_connection, run_command
from provision.transport.hostkeys import KnownHostsPolicy
from provision.transport.options import HostFailure, SshOptions


def test_localhost_runs_without_ssh():
    result = run_command(Host("localhost"), "echo out; echo err >&2; exit 3", SshOptions())
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)


def test_local_timeout():
    with pytest.raises(HostFailure, match="still running"):
        run_command(Host("localhost"), "sleep 5", SshOptions(command_timeout=0.2))


@pytest.mark.parametrize(
    "error, kind",
    [
        (paramiko.AuthenticationException("no"), "auth"),
        (socket.gaierror(-2, "Name or service not known"), "unreachable"),
        (TimeoutError(), "timeout"),
        (ConnectionRefusedError(111, "Connection refused"), "unreachable"),
        (paramiko.SSHException("boom"), "ssh"),
        (paramiko.SSHException("Timeout opening channel."), "timeout"),  # ProxyJump hop's channel
        (paramiko.SSHException("No existing session"), "timeout"),  # key exchange unfinished in time
        (paramiko.ChannelException(2, "Connect failed"), "unreachable"),  # ProxyJump hop cannot go on
    ],
)
def test_failures_become_one_line_kinds(error, kind):
    failure = describe_failure(error, SshOptions())
    assert failure.kind == kind and "\n" not in str(failure)


def test_unreadable_key_named():
    with pytest.raises(HostFailure, match="cannot read key file /nonexistent/key"):
        run_command(Host("h", address="127.0.0.1", port=1, key="/nonexistent/key"), "true", SshOptions(connect_timeout=0.5))


# --- time limits (issue 6 item 11) -------------------------------------------------------------


@contextmanager
def blackhole(banner: bytes = b""):
    """A 127.0.0.1 port whose kernel completes the TCP handshake but no SSH server ever answers:
    nothing accepts (or, with ``banner``, a thread accepts, sends it, then stays silent)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []
    stop = threading.Event()

    def answer_then_stall():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.sendall(banner)
            held.append(conn)

    thread = threading.Thread(target=answer_then_stall, daemon=True) if banner else None
    if thread:
        thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        if thread:
            thread.join()
        for conn in held:
            conn.close()
        server.close()


class Recorded(Exception):
    """Raised by the recording stand-in for SSHClient.connect, after it saw its arguments."""


def record_connect(connection, calls):
    def connect(**kwargs):
        calls.append(kwargs)
        raise Recorded()

    connection.client.connect = connect


def test_paramiko_gets_the_float_timeouts(tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  ConnectTimeout 7\n")  # the CLI value wins, on every hop
    connection = open_connection(Host("h", address="10.9.9.9"), SshOptions(connect_timeout=0.5, ssh_config=config))
    calls = []
    record_connect(connection, calls)
    with pytest.raises(Recorded):
        connection.open()
    (kwargs,) = calls
    assert kwargs["timeout"] == 0.5 and isinstance(kwargs["timeout"], float)
    assert kwargs["banner_timeout"] == 0.5 and kwargs["channel_timeout"] == 0.5


def test_proxyjump_hop_gets_timeouts_and_strict_host_keys(tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text("Host target\n  ProxyJump jumper@jump.example:2200\n")
    connection = open_connection(Host("target"), SshOptions(connect_timeout=0.5, ssh_config=config))
    jump = connection.gateway
    assert (jump.host, jump.port, jump.user) == ("jump.example", 2200, "jumper")
    calls = []
    record_connect(jump, calls)
    with pytest.raises(Recorded):
        connection.open()  # opens the jump hop first
    (kwargs,) = calls
    assert kwargs["timeout"] == 0.5 and kwargs["banner_timeout"] == 0.5 and kwargs["channel_timeout"] == 0.5
    policy = jump.client._policy
    assert isinstance(policy, KnownHostsPolicy) and not policy.accept_new and policy.hostname == "[jump.example]:2200"


def run_in_thread(host, options):
    """run_command in a thread; returns (HostFailure or result, seconds). Guards against a hang."""
    outcome = {}

    def target():
        started = time.monotonic()
        try:
            outcome["value"] = run_command(host, "true", options)
        except HostFailure as failure:
            outcome["value"] = failure
        outcome["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(10)  # paramiko's own defaults would wait 15 s (banner) or forever (jump hop)
    assert not thread.is_alive(), "connect hung past 10 s with --connect-timeout 0.5"
    return outcome["value"], outcome["seconds"]


@pytest.mark.parametrize("banner", [b"", b"SSH-2.0-silent\r\n"], ids=["no-banner", "banner-then-silence"])
def test_blackhole_fails_as_timeout(banner, tmp_path):
    with blackhole(banner) as port:
        failure, seconds = run_in_thread(
            Host("hole", address="127.0.0.1", port=port), SshOptions(connect_timeout=0.5, known_hosts=tmp_path / "kh")
        )
    assert isinstance(failure, HostFailure), failure
    assert failure.kind == "timeout" and "0.5s" in str(failure), (failure.kind, str(failure), seconds)


def test_blackhole_jump_host_fails_as_timeout(tmp_path):
    with blackhole() as port:
        config = tmp_path / "ssh_config"
        config.write_text(f"Host target\n  ProxyJump 127.0.0.1:{port}\n")
        failure, seconds = run_in_thread(
            Host("target"), SshOptions(connect_timeout=0.5, ssh_config=config, known_hosts=tmp_path / "kh")
        )
    assert isinstance(failure, HostFailure) and failure.kind == "timeout", (failure, seconds)


# --- issue 9: the shared Fabric config, the command on the channel, cached keys ----------------


def test_opening_connections_never_rewrites_the_shared_config(monkeypatch, tmp_path):
    # Every thread shares one Config per ssh_config file. A write to it (Fabric stored
    # inline_ssh_env there) re-merges it, emptying it for a moment under the other threads:
    # hosts then failed with "No attribute or config key found for 'gateway'".
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  User someone\n")
    shared = connection_module._fabric_config(config)
    merges = []
    real_merge = invoke.config.Config.merge
    monkeypatch.setattr(invoke.config.Config, "merge", lambda self: (merges.append(self), real_merge(self))[1])
    for name in ("a", "b"):
        opened = open_connection(Host(name, address="10.9.9.9"), SshOptions(ssh_config=config))
        assert opened.config is shared and opened.user == "someone"
    assert [m for m in merges if m is shared] == []


def test_key_parsed_once_per_file_version(tmp_path, monkeypatch):
    from cluster_support import write_ed25519

    key = tmp_path / "id_ed25519"
    write_ed25519(key, "test")
    loads = []
    real = paramiko.PKey.from_path
    monkeypatch.setattr(
        paramiko.PKey, "from_path", staticmethod(lambda path, password=None: (loads.append(path), real(path, password))[1])
    )
    first = open_connection(Host("a", address="10.9.9.9", key=str(key)), SshOptions(ssh_config=Path("/dev/null")))
    second = open_connection(Host("b", address="10.9.9.8", key=str(key)), SshOptions(ssh_config=Path("/dev/null")))
    assert first.connect_kwargs["pkey"] is second.connect_kwargs["pkey"] and len(loads) == 1
    assert first.connect_kwargs["key_filename"] == []  # not read again by paramiko
    write_ed25519(key, "rotated")  # a new file version is read again
    third = open_connection(Host("c", address="10.9.9.7", key=str(key)), SshOptions(ssh_config=Path("/dev/null")))
    assert third.connect_kwargs["pkey"] is not first.connect_kwargs["pkey"] and len(loads) == 2


def test_encrypted_key_left_to_paramiko(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = tmp_path / "id_locked"
    key.write_bytes(
        ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.BestAvailableEncryption(b"secret")
        )
    )
    opened = open_connection(Host("a", address="10.9.9.9", key=str(key)), SshOptions(ssh_config=Path("/dev/null")))
    assert "pkey" not in opened.connect_kwargs and opened.connect_kwargs["key_filename"] == [str(key)]


def test_invoke_s_missing_attribute_message_becomes_the_host_s_real_reason():
    """Issue 34: at a load of 17, probe once failed with invoke's "No attribute or config key found
    ..." listing every attribute of a Connection instead of the host's reason. A property of fabric's
    Connection that fails inside comes out as that AttributeError; the error being handled then
    (here a timeout) is the reason, else one line that the connection was lost."""

    import fabric

    from provision.transport.connection import describe_failure
    from provision.transport.options import SshOptions

    def missing_attribute_while(handling: BaseException | None) -> AttributeError:
        try:
            try:
                if handling is not None:
                    raise handling
                raise LookupError("nothing")
            except (OSError, LookupError):
                fabric.Connection("h").gone_transport  # noqa: B018 - what a failing property does
        except AttributeError as error:
            return error
        raise AssertionError("no AttributeError")

    plain = missing_attribute_while(None)
    assert "Valid real attributes" in str(plain)  # invoke's message, as the issue saw it
    failure = describe_failure(missing_attribute_while(TimeoutError("timed out")), SshOptions(connect_timeout=2))
    assert (failure.kind, str(failure)) == ("timeout", "no SSH answer within 2s")
    failure = describe_failure(missing_attribute_while(ConnectionResetError(104, "Connection reset by peer")), SshOptions())
    assert (failure.kind, str(failure)) == ("unreachable", "Connection reset by peer")
    lost = describe_failure(plain, SshOptions())
    assert lost.kind == "unreachable" and str(lost).startswith("the SSH connection was lost while it was being set up")
    assert "Valid" not in str(lost) and len(str(lost)) < 120
