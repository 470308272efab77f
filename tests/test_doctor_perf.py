"""doctor --perf's scheduling (provision.doctor.perf): the rounds planned, the budget's sizing, the options
checked at the edge, and how one pair's trouble becomes that pair's failure. The real tests run
iperf3 between containers (test_doctor_perf_cluster.py); here the sessions are stand-ins that
answer as a node would (a hang, unparsable output, a lost connection), to pin what is said."""

from __future__ import annotations

import pytest

from provision.doctor.perf import (
    PerfSettings,
    _Pairs,
    _version_ok,
    client_command,
    perf_settings,
    plan_rounds,
    server_command,
    test_length as seconds_for,
)
from provision.errors import ProvisionError
from provision.transport.options import CommandResult, HostFailure


def test_plan_rounds_takes_k_random_matchings_with_rounds_else_the_circle():
    nodes = [f"n{i}" for i in range(6)]
    assert len(plan_rounds(nodes, PerfSettings(rounds=2, seed=3))) == 2
    assert len(plan_rounds(nodes, PerfSettings(seed=3))) == 5


def test_the_budget_shortens_each_test_to_fit_the_rounds_but_not_below_a_second():
    assert seconds_for(PerfSettings(), 63) == 3  # no budget: the default length
    assert seconds_for(PerfSettings(budget_s=600), 15) == 3
    assert seconds_for(PerfSettings(budget_s=60), 15) == 2  # 60/15 = 4 s a round, 1.5 of it overhead
    assert seconds_for(PerfSettings(budget_s=60), 63) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((False, 3, None), "add --perf"),
        ((False, None, "60s"), "add --perf"),
        ((True, None, "soon"), "--budget 'soon'"),
        ((True, None, "0s"), "--budget '0s'"),
        ((True, None, "1.5m"), "--budget '1.5m'"),
        ((True, 0, None), "--rounds"),
        ((True, None, None, 80), "--perf-port 80"),
    ],
)
def test_bad_options_are_one_line(args, message):
    with pytest.raises(ProvisionError, match=message.replace(".", r"\.")):
        perf_settings(*args)


def test_budgets_in_seconds_minutes_hours():
    assert [perf_settings(True, None, b).budget_s for b in ("45", "45s", "2m", "1h")] == [45, 45, 120, 3600]
    assert perf_settings(False, None, None) is None


def test_bidir_needs_iperf3_3_7():
    assert _version_ok("iperf3 iperf 3.12 (cJSON 1.7.15)") and _version_ok("iperf3 iperf 3.7")
    assert not _version_ok("iperf3 iperf 3.1.3") and not _version_ok("iperf3 iperf x")


def test_the_commands_quote_their_addresses_and_cap_the_output():
    assert "iperf3 -s -1 -J -B 10.0.0.2 -p 47201" in server_command("10.0.0.2", 47201, 9)
    client = client_command("10.0.0.1", "10.0.0.2", 47201, 3, True)
    assert "iperf3 -c 10.0.0.2 -B 10.0.0.1 -p 47201 -t 3 --bidir -J" in client and "head -c 1048576" in client
    assert "Connection refused" not in client  # no retry: the server is known to listen when the client starts


COOKIE = "k7wqv3tonoxbu3nxeuyximoh6imryamz3qsn"
STARTED = CommandResult("@listening /tmp/provision-perf.AbCdE12345\n", "", 0)


def report(cookie: str = COOKIE, error: str | None = None) -> str:
    """An iperf3 --json report: the figures of a passing --bidir test, or an error."""
    start = f'"start": {{"cookie": "{cookie}"}}'
    if error is not None:
        return f'{{{start}, "error": "{error}"}}'
    end = '"end": {"sum_received": {"bits_per_second": 9.4e9}, "sum_received_bidir_reverse": {"bits_per_second": 9.3e9}}'
    return f"{{{start}, {end}}}"


def served(cookie: str = COOKIE) -> CommandResult:
    """The server's report, as collect_command prints it, after it served the client ``cookie``."""
    return CommandResult(f"@rc 0\n{report(cookie)}\niperf3: exiting\n", "", 0)


class _Node:
    """A stand-in session: answers the server's start and collect scripts and the client as told."""

    def __init__(self, client=None, start=STARTED, collect=None):
        self.client, self.start, self.collect, self.commands = client, start, collect or served(), []

    def run(self, command, stdin, timeout=None):
        self.commands.append(command)
        if "mktemp -d /tmp/provision-perf." in command:
            answer = self.start
        elif command.startswith("d=/tmp/provision-perf."):
            answer = self.collect
        else:
            answer = self.client
        if isinstance(answer, BaseException):
            raise answer
        return answer


def _pair(client_answer, **server):
    sessions = {"a": _Node(client=client_answer), "b": _Node(**server)}
    pairs = _Pairs("tcp eth0", sessions, {"a": "10.0.0.1", "b": "10.0.0.2"}, PerfSettings(), {"a": True, "b": True})
    return pairs.run(("a", "b"), 1, 5.0)


def test_the_figures_count_when_the_server_doctor_started_served_this_client():
    link = _pair(CommandResult(report(), "", 0))
    assert (link.gbps, link.forward_gbps, link.reverse_gbps, link.error) == (9.3, 9.4, 9.3, "")


def test_a_test_that_hangs_is_named_and_ends():
    link = _pair(CommandResult("", "", 124))
    assert link.gbps is None and link.error == "the test hung: stopped after 11s"
    link = _pair(HostFailure("timeout", "command timed out after 5s"))
    assert link.gbps is None and link.error.startswith("the test did not finish: HostFailure: command timed out after 5s")


def test_output_that_does_not_parse_fails_that_pair_only():
    link = _pair(CommandResult("Segmentation fault\n", "", 0))
    assert link.gbps is None and link.error.startswith("iperf3's output on a does not parse: cannot parse `iperf3` output")


# Issue 33 finding 5: a user's `iperf3 -s -p 47201` held the port; doctor's server failed to bind,
# and the client measured against hers (her server can report any figure).
def test_a_server_that_did_not_start_fails_the_test_named_and_no_client_runs():
    squatted = CommandResult(
        "@failed exit 1\n" + report(error="error - unable to start listener for connections: Address already in use") + "\n",
        "",
        1,
    )
    sessions = {"a": _Node(client=CommandResult(report(), "", 0)), "b": _Node(start=squatted)}
    pairs = _Pairs("tcp eth0", sessions, {"a": "10.0.0.1", "b": "10.0.0.2"}, PerfSettings(), {"a": True, "b": True})
    link = pairs.run(("a", "b"), 1, 5.0)
    assert link.gbps is None and link.error == (
        "the test server on b did not start: error - unable to start listener for connections: Address already in use "
        "(another process holds port 47201 on 10.0.0.2) (exit 1)"
    )
    assert sessions["a"].commands == []  # the client never ran: it read no stream from a server doctor did not start
    late = CommandResult("@failed not listening on port 47201 after 5 s\n", "", 1)
    assert _pair(CommandResult(report(), "", 0), start=late).error == (
        "the test server on b did not start: not listening on port 47201 after 5 s"
    )


def test_figures_from_a_test_the_server_did_not_serve_never_count():
    """Another user's client reached doctor's one-off server first; doctor's client was then served
    by whoever listened next: its figures are refused (the server's report names another cookie)."""
    link = _pair(CommandResult(report(), "", 0), collect=served("someoneelsescookie000000000000000000"))
    assert link.gbps is None and link.error == "the test server on b did not serve this test: another client reached it first"
    link = _pair(CommandResult(report(), "", 0), collect=CommandResult("@rc 1\nSegmentation fault\n", "", 0))
    assert link.gbps is None and link.error.startswith("the test server on b did not serve this test: no report")
    link = _pair(CommandResult(report(), "", 0), collect=CommandResult("@rc none\n", "", 0))
    assert link.gbps is None and "no client reached it" in link.error
    no_cookie = report().replace(COOKIE, "")  # neither end names a test: nothing ties the figures to this server
    link = _pair(CommandResult(no_cookie, "", 0), collect=CommandResult(f"@rc 0\n{no_cookie}\n", "", 0))
    assert link.gbps is None and link.error == "the test server on b did not serve this test: no report of the client it served"


def test_a_client_turned_away_because_another_reached_the_server_first_says_so():
    busy = CommandResult(report(error="the server is busy running a test. try again later"), "", 1)
    link = _pair(busy, collect=served("someoneelsescookie000000000000000000"))
    assert link.gbps is None
    assert link.error == "the server is busy running a test. try again later; the server on b: it served another client"


def test_a_refused_client_names_the_port_and_the_servers_words():
    refused = CommandResult(report(error="unable to connect to server: Connection refused"), "", 1)
    link = _pair(refused, collect=CommandResult("@rc none\n", "", 0))
    assert link.error.startswith("b refused the test port 47201 on 10.0.0.2")
    assert link.error.endswith("; the server on b: no client reached it")


def test_a_nodes_error_text_is_shown_with_control_characters_made_visible():
    link = _pair(CommandResult('{"error": "boom\\u001b[31m red\\u0007"}', "", 1), collect=CommandResult("@rc 0\n", "", 0))
    assert link.error.startswith("boom\\x1b[31m red\\x07")  # provision.text.shown: each control character as its escape


def test_bidir_only_when_both_ends_have_iperf3_3_7():
    sessions = {"a": _Node(client=CommandResult("{}", "", 1)), "b": _Node()}
    _Pairs("tcp eth0", sessions, {"a": "10.0.0.1", "b": "10.0.0.2"}, PerfSettings(), {"a": True, "b": False}).run(
        ("a", "b"), 1, 5.0
    )
    assert "iperf3 -c" in sessions["a"].commands[0] and "--bidir" not in sessions["a"].commands[0]


def test_a_hint_shared_by_several_nodes_is_said_once():
    """Issue 34: `doctor --perf` repeated the same iperf3 install hint once per node."""
    from provision.doctor.perf import INSTALL_HINT, Coverage, PerfRun

    why = f"no iperf3 on PATH: {INSTALL_HINT}"
    run = PerfRun([], Coverage(0, 0, 0, 0, None), {"n1": why, "n2": "not reached", "n3": why}, "eth0", 1.0)
    [nodes] = [r for r in run.results(3) if r.name == "perf nodes"]
    assert nodes.detail == f"not tested: n1, n3: {why}; n2: not reached" and nodes.detail.count(INSTALL_HINT) == 1
