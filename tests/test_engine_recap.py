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


def test_a_failed_check_after_the_run_is_counted_and_said():
    # Issue 26: fresh nodes exited 1 with failed=0 everywhere; the only trace was a summary line.
    good = HostRun(Host("f1"), None, results=[result("f1", "ok"), result("f1", "changed")])
    other = HostRun(Host("s1"), None, results=[result("s1", "ok")])
    report = report_of({"f1": good, "s1": other})
    assert report.ok
    report.count_failed_checks([("f1", "nfs: /data/imagenet: not mounted"), ("f1", "BatchMode SSH alice@f1 -> s1")])
    assert [r.line() for r in report.recap] == [
        "f1 : ok=2 changed=1 unreachable=0 failed=2 skipped=0",
        "s1 : ok=1 changed=0 unreachable=0 failed=0 skipped=0",
    ]
    assert report.recap[0].message == "verification failed: nfs: /data/imagenet: not mounted" and not report.ok


def test_loop_items_are_labelled_by_what_names_them_not_printed_whole():
    sha = "ac5556c9acf30ab650ca97f7e61f1e587848e629c70d558207ad275df5ea8e3a"
    installer = {"installer": "installers/A.sh", "sha256": sha, "prefix": "/opt/anaconda3"}
    labels = [
        TaskResult("f1", "p", "t", "x.yml:1", item=item).item_label()
        for item in (installer, {"path": "/data/imagenet"}, {"name": "alice", "uid": 2001}, "plain")
    ]
    assert labels == ["/opt/anaconda3", "/data/imagenet", "alice", "plain"]
