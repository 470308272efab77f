"""Integration: commands on the paramiko channel against real sshd (stdin, streams, exit, limits)."""

from __future__ import annotations

import pytest

from provision.inventory.model import Host
from provision.transport.connection import run_command
from provision.transport.options import HostFailure, SshOptions

pytestmark = pytest.mark.cluster


@pytest.fixture
def node1(cluster, cluster_files):
    _, known = cluster_files
    host = Host("node1", address="127.0.0.1", port=cluster.ports["node1"], user="mpi", key=str(cluster.key))
    return host, SshOptions(known_hosts=known, connect_timeout=5, command_timeout=20)


def test_streams_and_exit_code(node1):
    host, options = node1
    result = run_command(host, "echo out; echo err >&2; printf 'caf\\303\\251'; exit 7", options)
    assert (result.stdout, result.stderr, result.exit_code) == ("out\ncafé", "err\n", 7)


def test_stdin_is_sent_then_closed(node1):
    host, options = node1
    script = "echo from-stdin $(id -un)\nexit 3\n"
    result = run_command(host, "sh -s", options, stdin=script)
    assert (result.stdout, result.exit_code) == ("from-stdin mpi\n", 3)
    assert run_command(host, "wc -c", options, stdin=b"\x00\xff" * 50000).stdout.strip() == "100000"


def test_no_stdin_is_closed_at_once_like_ssh_n(node1):
    host, options = node1
    # cat would wait forever on an open stdin; the command limit would end it as a timeout.
    assert run_command(host, "cat; echo done", SshOptions(**{**options.__dict__, "command_timeout": 5})).stdout == "done\n"


def test_big_output_on_both_streams_does_not_stall(node1):
    host, options = node1
    # 6 MB on each stream, 3 MB at a time, stderr first: past the 2 MiB channel window, so a
    # reader of one stream only would wait forever.
    command = "for i in 1 2; do head -c 3000000 /dev/zero >&2; head -c 3000000 /dev/zero; done"
    result = run_command(host, command, SshOptions(**{**options.__dict__, "command_timeout": 120}))
    assert (len(result.stdout), len(result.stderr), result.exit_code) == (6000000, 6000000, 0)


def test_killed_command_has_no_exit_status(node1):
    host, options = node1
    assert run_command(host, "kill -9 $$", options).exit_code == -1


def test_timeout_while_output_keeps_coming(node1):
    host, options = node1
    with pytest.raises(HostFailure) as error:
        run_command(host, "while :; do echo tick; sleep 0.05; done", SshOptions(**{**options.__dict__, "command_timeout": 0.7}))
    assert error.value.kind == "timeout" and "0.7s" in str(error.value)
