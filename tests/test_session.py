"""Sessions: stdin fed and closed, results not failures, timeouts, unreachable hosts as HostFailure."""

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
