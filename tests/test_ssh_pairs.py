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
