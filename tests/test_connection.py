"""Connection: local runs, failure descriptions. (SSH itself is exercised on the sshd cluster.)"""

import socket

import paramiko
import pytest

from provision.connection import HostFailure, SshOptions, describe_failure, run_command
from provision.inventory import Host


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
        (socket.timeout(), "timeout"),
        (ConnectionRefusedError(111, "Connection refused"), "unreachable"),
        (paramiko.SSHException("boom"), "ssh"),
    ],
)
def test_failures_become_one_line_kinds(error, kind):
    failure = describe_failure(error, SshOptions())
    assert failure.kind == kind and "\n" not in str(failure)


def test_unreadable_key_named():
    with pytest.raises(HostFailure, match="cannot read key file /nonexistent/key"):
        run_command(Host("h", address="127.0.0.1", port=1, key="/nonexistent/key"), "true", SshOptions(connect_timeout=0.5))
