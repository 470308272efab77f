"""BatchMode verification: the script quotes everything, hostile output is ignored, pairs listed."""

import pytest

from provision.checks.ssh_pairs import parse_verify, verify_pairs, verify_script
from provision.transport.options import CommandResult, HostFailure


def test_script_runs_ssh_batchmode_as_each_user():
    script = verify_script(["alice"], {"n2": "n2", "n3": "10.0.0.3"})
    assert "runuser -u alice -- ssh -n -o BatchMode=yes -o ConnectTimeout=10 -o StrictHostKeyChecking=yes n2 true" in script
    assert script.count(" &") == 2 and script.rstrip().endswith("wait")
    with pytest.raises(ValueError):
        verify_script(["alice"], {"n2": "n2;reboot"})


def test_parse_ignores_unexpected_lines():
    text = "alice n2 0\nalice n3 255\nmallory n2 0\nalice n2 x\nnoise\n"
    assert parse_verify(text, ["alice"], {"n2": "n2", "n3": "n3"}) == {("alice", "n2"): 0, ("alice", "n3"): 255}


class FakeSession:
    def __init__(self, stdout=None, fail=False):
        self.stdout, self.fail = stdout, fail

    def run(self, command, stdin=None, timeout=None):
        if self.fail:
            raise HostFailure("unreachable", "connection refused")
        return CommandResult(self.stdout, "", 0)


def test_pairs_listed_with_failures():
    sessions = {"n1": FakeSession("alice n2 0\n"), "n2": FakeSession("alice n1 255\n"), "n3": FakeSession(fail=True)}
    pairs = verify_pairs(sessions, {"n1": "n1", "n2": "n2", "n3": "n3"}, ["alice"], forks=3)
    bad = {(p.source, p.target): p.message for p in pairs if not p.ok}
    assert len(pairs) == 6
    assert bad == {
        ("n1", "n3"): "no answer",
        ("n2", "n1"): "ssh exit 255",
        ("n2", "n3"): "no answer",
        ("n3", "n1"): "n3 unreachable",
        ("n3", "n2"): "n3 unreachable",
    }


def test_a_stopped_node_is_counted_as_not_checked_never_dropped():
    """Issue 34: with nw4 failed, the line counted 12/12 pairs on four nodes (24 expected), nw4
    silently left out, or disappeared; now every ordered pair of the run is counted, each tried
    or said not checked and why."""
    import io

    from rich.console import Console

    from provision.checks.ssh_pairs import PairResult, unchecked_pairs
    from provision.cli.setup_view import print_recap
    from provision.cluster_setup import SetupResult
    from provision.engine.recap import Recap, RunReport

    users = {f"nw{i}": ["mpi", "alice"] for i in range(1, 5)}
    stopped = {"nw4": "failed at task 'jupyter_server_config.py of each user'"}
    healthy = [n for n in users if n not in stopped]
    tried = [PairResult(s, u, t, True) for s in healthy for t in healthy if s != t for u in users[s]]
    not_tried = unchecked_pairs(users, stopped)
    assert len(tried) == 12 and len(not_tried) == 12 and {p.message for p in not_tried} == {f"not checked: nw4 {stopped['nw4']}"}
    recap = [Recap(n, ok=3) for n in healthy] + [Recap("nw4", failed=1)]
    done = SetupResult(RunReport(recap=recap), pairs=tried + not_tried, stopped=stopped)
    out = io.StringIO()
    print_recap(Console(file=out, width=300), done)
    assert (
        "BatchMode SSH: 12/12 ordered pairs connect; 12 of the 24 not checked: "
        "nw4 failed at task 'jupyter_server_config.py of each user'"
    ) in out.getvalue()
    assert not done.bad_pairs and len(done.unchecked_pairs) == 12 and not done.ok
    everyone = SetupResult(
        RunReport(recap=[Recap(n, failed=1) for n in users]), pairs=unchecked_pairs(users, dict.fromkeys(users, "x"))
    )
    assert len(everyone.pairs) == 24  # all four stopped: the line still says so, 0/0 tried
    out = io.StringIO()
    print_recap(Console(file=out, width=300), everyone)
    assert "BatchMode SSH: 0/0 ordered pairs connect; 24 of the 24 not checked" in out.getvalue()
