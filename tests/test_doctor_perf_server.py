"""provision.doctor.perf_server's scripts run for real with sh on this machine, with a small Python
listener as the "tool": the start script answers only once that very process holds the listening
socket (read from /proc), says why when it exited or never listened, and the collect script hands
back its exit status and output and removes its folder (issue 33 finding 5)."""

from __future__ import annotations

import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from provision.doctor.perf_server import collect_command, parse_collected, parse_started, start_command

LISTENER = (
    "import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(1); c, _ = s.accept(); c.sendall(b'served'); print('served one')"
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _sh(script: str) -> str:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60).stdout


@pytest.fixture
def tool():
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp: not Linux")
    return lambda port: f"{shlex.quote(sys.executable)} -c {shlex.quote(LISTENER)} {port}"


def test_the_server_is_the_ports_listener_before_the_answer_then_collected(tool):
    port = _free_port()
    folder, why, _ = parse_started(_sh(start_command(tool(port), port, 30)))
    assert folder is not None and why == "", why
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        assert client.recv(6) == b"served"  # the very process started: it answers at once
    status, output = parse_collected(_sh(collect_command(folder)))
    assert (status, output) == (0, "served one\n")
    assert not Path(folder).exists()


def test_a_port_held_by_another_process_is_a_failed_start_with_its_words(tool):
    port = _free_port()
    with socket.socket() as squatter:
        squatter.bind(("0.0.0.0", port))  # noqa: S104 - the squatter takes every address
        squatter.listen(1)
        folder, why, said = parse_started(_sh(start_command(tool(port), port, 30)))
    assert folder is None and why == "exit 1" and "Address already in use" in said, (why, said)


def test_a_tool_that_never_listens_is_stopped_and_named(tool):
    port = _free_port()
    before = set(Path("/tmp").glob("provision-perf.*"))
    folder, why, _ = parse_started(_sh(start_command("sleep 30", port, 30, listen_wait=0.5)))
    assert folder is None and why == f"not listening on port {port} after 0.5 s"
    assert set(Path("/tmp").glob("provision-perf.*")) <= before  # its folder removed


def test_a_listener_of_another_process_on_the_port_does_not_count(tool):
    """The port listens (another process of the same user holds it), the tool started does not
    listen: not "listening" (the socket is not among its file descriptors)."""
    port = _free_port()
    with socket.socket() as other:
        other.bind(("127.0.0.1", port))
        other.listen(1)
        folder, why, _ = parse_started(_sh(start_command("sleep 30", port, 30, listen_wait=0.5)))
    assert folder is None and why.startswith("not listening on port")


def test_collect_refuses_a_folder_that_is_not_its_own():
    with pytest.raises(ValueError):
        collect_command("/tmp/provision-perf.x; rm -rf ~")
    assert parse_collected("@rc none\n") == (None, "")
    assert parse_started("garbage") == (None, "no answer from the start script", "garbage")
