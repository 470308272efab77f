"""Sessions: stdin fed and closed, results not failures, timeouts, unreachable hosts as HostFailure."""

from types import SimpleNamespace

import pytest

from provision.inventory.model import Host
from provision.transport.options import HostFailure, SshOptions
from provision.transport.session import Session


def test_local_session_feeds_stdin():
    with Session(Host("localhost"), SshOptions()) as session:
        result = session.run("read -r a; echo got $a; exit 3", "hello\n")
        assert (result.stdout, result.exit_code) == ("got hello\n", 3)
        assert session.run("cat", b"bytes").stdout == "bytes"
        assert session.round_trips == 2


def test_local_timeout():
    with pytest.raises(HostFailure) as caught:
        Session(Host("localhost"), SshOptions()).run("sleep 5", timeout=0.2)
    assert caught.value.kind == "timeout"


def test_unreachable_host_is_a_host_failure(tmp_path):
    session = Session(Host("n1", address="127.0.0.1", port=1), SshOptions(known_hosts=tmp_path / "kh", connect_timeout=2))
    with pytest.raises(HostFailure) as caught:
        session.run("true")
    assert caught.value.kind == "unreachable"
    session.close()


class _FakeConnection:
    """What Session uses of a Fabric connection: open, close, the transport's key and socket."""

    opened = 0

    def __init__(self, host, options):
        self.host, self.is_open = host.address, False
        key = SimpleNamespace(get_name=lambda: "ssh-ed25519", get_base64=lambda: f"KEY-{host.name}")
        transport = SimpleNamespace(get_remote_server_key=lambda: key, sock=None)
        self.client = SimpleNamespace(get_transport=lambda: transport)

    def open(self):
        _FakeConnection.opened += 1
        self.is_open = True

    def close(self):
        self.is_open = False


def test_past_the_limit_the_least_recently_used_idle_connection_is_closed(monkeypatch):
    """Issue 37: a run keeps its hosts' sessions between plays; past open_limit() connections the
    least recently used idle one is closed (a session running a command never is), and it
    connects again when used again; what its last connection verified is kept meanwhile."""
    import provision.transport.session as session_module

    connections = []

    def connect(host, options):
        connections.append(_FakeConnection(host, options))
        return connections[-1]

    monkeypatch.setattr(session_module, "open_connection", connect)
    monkeypatch.setattr(session_module, "run_on_connection", lambda c, *a: session_module.CommandResult(c.host, "", 0))
    monkeypatch.setattr(session_module, "open_limit", lambda: 3)
    monkeypatch.setattr(session_module, "CONNECTED", session_module._Connected())
    sessions = [Session(Host(f"n{i}", address=f"10.0.0.{i}"), SshOptions()) for i in range(5)]
    busy = sessions[0]
    busy.run("true")
    busy._lock.acquire()  # as while it runs a command in another thread
    for session in sessions[1:]:
        assert session.run("true").stdout == session.host.address
    open_now = [s.host.name for s in sessions if s._connection is not None]
    assert open_now == ["n0", "n3", "n4"] and len(session_module.CONNECTED) == 3  # n0 busy: n1, n2 closed
    assert [c.is_open for c in connections] == [True, False, False, True, True]
    assert sessions[1].verified_host_key() == "ssh-ed25519 KEY-n1"  # what n1's closed connection verified
    busy._lock.release()
    sessions[1].run("true")  # connects again; now n0 is the least recently used idle one
    assert len(connections) == 6 and busy._connection is None and sessions[1]._connection is connections[5]
    for session in sessions:
        session.close()
    assert len(session_module.CONNECTED) == 0 and not any(c.is_open for c in connections)


def _gated_connections(monkeypatch, fail: set[str] = frozenset()):
    """open_connection replaced by fakes whose open() waits for ``gate`` (a slow handshake) and
    fails as unreachable for the hosts in ``fail``; returns (gate, connections, commands run)."""
    import threading

    import provision.transport.session as session_module

    gate, connections, commands = threading.Event(), [], []

    class Slow(_FakeConnection):
        def open(self):
            assert gate.wait(10)
            if self.host in fail:
                raise OSError("connection refused")
            self.made = True
            super().open()

    def connect(host, options):
        connections.append(Slow(host, options))
        return connections[-1]

    def run(connection, command, *args):
        commands.append((connection.host, command))
        return session_module.CommandResult("ran", "", 0)

    monkeypatch.setattr(session_module, "open_connection", connect)
    monkeypatch.setattr(session_module, "run_on_connection", run)
    monkeypatch.setattr(session_module, "describe_failure", lambda error, *a: HostFailure("unreachable", str(error)))
    monkeypatch.setattr(session_module, "CONNECTED", session_module._Connected())
    return gate, connections, commands


def test_open_ahead_returns_at_once_and_the_first_run_waits_for_the_handshake(monkeypatch):
    """Issue 37: setup-cluster starts the handshakes before its own checks (open_ahead) so they
    overlap; the first command waits for its connection, and no command runs before it is asked."""
    import threading

    gate, connections, commands = _gated_connections(monkeypatch)
    session = Session(Host("n1", address="10.0.0.1"), SshOptions())
    session.open_ahead()  # returns while the handshake waits at the gate
    assert len(connections) == 1 and not connections[0].is_open and commands == []
    results = []
    runner = threading.Thread(target=lambda: results.append(session.run("true")))
    runner.start()
    runner.join(0.2)
    assert runner.is_alive() and commands == []  # waiting for the handshake, not connecting twice
    gate.set()
    runner.join(5)
    assert [r.stdout for r in results] == ["ran"] and commands == [("10.0.0.1", "true")]
    assert len(connections) == 1 and session.round_trips == 1
    session.close()


def test_a_failed_handshake_ahead_is_the_first_runs_failure(monkeypatch):
    gate, connections, commands = _gated_connections(monkeypatch, fail={"10.0.0.2"})
    gate.set()
    session = Session(Host("n2", address="10.0.0.2"), SshOptions())
    session.open_ahead()
    with pytest.raises(HostFailure) as caught:
        session.run("true")
    assert caught.value.kind == "unreachable" and "connection refused" in str(caught.value)
    assert commands == [] and len(connections) == 1  # raised as if it had connected then, not retried


def test_abandon_closes_a_connection_ahead_without_waiting_for_it(monkeypatch):
    """Bad input found while the handshake is under way: abandon() returns at once, and the
    connection is closed once it is made; nothing ever runs."""
    import time

    gate, connections, commands = _gated_connections(monkeypatch)
    session = Session(Host("n3", address="10.0.0.3"), SshOptions())
    session.open_ahead()
    started = time.monotonic()
    session.abandon()
    assert time.monotonic() - started < 1
    gate.set()
    deadline = time.monotonic() + 5
    while not session._lock.acquire(blocking=False):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    session._lock.release()
    assert connections[0].made and not connections[0].is_open and session._connection is None and commands == []


def test_abandon_waits_a_bounded_time_for_a_handshake_to_end_cleanly(monkeypatch):
    """A refused run gives the handshakes under way a moment to finish (a clean logout rather
    than a login cut off half way), then closes them; past the wait it returns and the thread
    closes its connection once made."""
    import threading
    import time

    gate, connections, commands = _gated_connections(monkeypatch)
    session = Session(Host("n4", address="10.0.0.4"), SshOptions())
    session.open_ahead()
    threading.Timer(0.2, gate.set).start()
    started = time.monotonic()
    session.abandon(wait=5)
    assert 0.1 < time.monotonic() - started < 4  # returned once the handshake ended, not at the limit
    assert connections[0].made and not connections[0].is_open and session._connection is None and commands == []


def test_no_thread_to_be_had_means_connecting_on_first_use(monkeypatch):
    """Where a process limit refuses a new thread, open_ahead leaves the session as it was (its
    lock free), and the first command connects."""
    import threading

    gate, connections, commands = _gated_connections(monkeypatch)
    gate.set()

    def refused(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refused)
    session = Session(Host("n5", address="10.0.0.5"), SshOptions())
    session.open_ahead()
    assert connections == [] and not session._lock.locked()
    assert session.run("true").stdout == "ran" and len(connections) == 1
    session.close()


def test_a_connection_made_ahead_that_died_before_its_first_command_is_made_again(monkeypatch):
    """Idle while the controller checked, or while a password was asked, a connection made ahead
    may have been dropped (a NAT, sshd's UnusedConnectionTimeout): its first command connects
    again rather than failing the host. Once a command has run, a lost connection is a failure."""
    from types import SimpleNamespace

    gate, connections, commands = _gated_connections(monkeypatch)
    gate.set()
    session = Session(Host("n6", address="10.0.0.6"), SshOptions())
    session.open_ahead()
    assert session.run("true").stdout == "ran" and len(connections) == 1  # alive: used as it is
    second = Session(Host("n7", address="10.0.0.7"), SshOptions())
    second.open_ahead()
    with second._lock:  # the handshake is done
        pass
    second._connection.client = SimpleNamespace(get_transport=lambda: SimpleNamespace(is_active=lambda: False))
    assert second.run("true").stdout == "ran" and len(connections) == 3 and commands[-1] == ("10.0.0.7", "true")
    session.close(), second.close()
