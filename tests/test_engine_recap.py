"""The recap: counts per host as Ansible prints them, and why a host stopped."""

from provision.engine.hostrun import HostRun, TaskResult
from provision.engine.recap import report_of
from provision.inventory.model import Host


def result(host, status, message=""):
    return TaskResult(host, "play", "task", "x.yml:1", status=status, message=message)


def test_counts_and_why_a_host_stopped():
    good = HostRun(Host("w1"), None, results=[result("w1", "ok"), result("w1", "changed"), result("w1", "skipped")])
    bad = HostRun(Host("w2"), None, results=[result("w2", "failed", "w2: no such user")], failed=True)
    gone = HostRun(Host("w3"), None, unreachable="w3: connection refused")
    odd = HostRun(Host("w4"), None, failed=True, error="ParseError: fact os")  # stopped without a failed task
    report = report_of({"w1": good, "w2": bad, "w3": gone, "w4": odd})
    assert [r.line() for r in report.recap] == [
        "w1 : ok=2 changed=1 unreachable=0 failed=0 skipped=1",
        "w2 : ok=0 changed=0 unreachable=0 failed=1 skipped=0",
        "w3 : ok=0 changed=0 unreachable=1 failed=0 skipped=0",
        "w4 : ok=0 changed=0 unreachable=0 failed=1 skipped=0",
    ]
    assert [r.message for r in report.recap] == ["", "w2: no such user", "w3: connection refused", "ParseError: fact os"]
    assert len(report.results) == 4 and not report.ok
    assert report_of({"w1": good}).ok
