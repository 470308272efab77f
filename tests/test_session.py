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
