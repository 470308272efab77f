"""Probe orchestration: localhost for real, replay, bounded parallelism, failures isolated."""

import os
import threading
from pathlib import Path

from conftest import run_cli
from provision.inventory.model import Host
from provision.probe import run as probe_module
from provision.probe.run import probe_hosts, replay
from provision.transport.options import SshOptions


def test_probe_localhost_for_real():
    (result,) = probe_hosts([Host("localhost")], SshOptions())
    assert result.ok, result.error
    assert result.facts.cpu.total_cpus >= 1


def test_replay_fixture_folders():
    results = replay(Path(__file__).parent / "fixtures" / "captures", ["minsky", "vm-x86", "missing", "../captures"])
    assert [r.ok for r in results] == [True, True, False, False]
    assert "not a host name" in results[3].error
    assert results[0].facts.unavailable["nvidia-smi-query"] == "not installed"
    assert results[2].error_kind == "missing"


def test_forks_bound_concurrency_and_failures_do_not_stop_others(monkeypatch):
    running, peak, lock = 0, 0, threading.Lock()

    def fake_probe(host, options):  # stands in for SSH only: concurrency is what is measured
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        threading.Event().wait(0.02)
        with lock:
            running -= 1
        if host.name == "bad":
            return probe_module.ProbeResult(host.name, None, "unreachable", "connection refused")
        return probe_module.ProbeResult(host.name, None, None, None)

    monkeypatch.setattr(probe_module, "probe_host", fake_probe)
    hosts = [Host(f"h{i}") for i in range(20)] + [Host("bad")]
    results = probe_hosts(hosts, SshOptions(), forks=4)
    assert peak <= 4
    assert [r.host for r in results] == [h.name for h in hosts]
    assert results[-1].error_kind == "unreachable"


def test_a_defect_while_deriving_one_host_costs_that_host_only(monkeypatch):
    def broken(host, *args, **kwargs):  # a parser defect (any exception but ParseError)
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(probe_module, "derive_facts", broken)
    (result,) = replay(Path(__file__).parent / "fixtures" / "captures", ["vm-x86"])
    assert not result.ok and result.error_kind == "parse"
    assert "ZeroDivisionError: division by zero" in result.error


def test_probe_replay_one_broken_host_others_saved_and_printed_exit_1(tmp_path):
    import shutil

    from conftest import run_cli

    captures = tmp_path / "cap"
    shutil.copytree(Path(__file__).parent / "fixtures" / "captures" / "minsky", captures / "good")
    broken = captures / "broken"
    shutil.copytree(captures / "good", broken)
    # A POWER host whose threads are all offline (a max() of nothing, before).
    info = (broken / "ppc64_cpu-info.txt").read_text().replace("*", " ")
    (broken / "ppc64_cpu-info.txt").write_text(info)
    # and one claiming a hundred million NUMA nodes (an unbounded expansion, before).
    huge = captures / "huge"
    shutil.copytree(captures / "good", huge)
    (huge / "numactl-H.txt").write_text("available: 100000000 nodes (0-99999999)\n")
    done = run_cli("probe", "--replay", str(captures), "--facts-dir", str(tmp_path / "facts"))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "broken: parse: cannot parse `ppc64_cpu-info` output: none of the 20 core(s)" in " ".join(done.stderr.split())
    assert "huge: parse: cannot parse `numactl-H` output line 1" in " ".join(done.stderr.split())
    assert (tmp_path / "facts" / "good.json").exists() and "good" in done.stdout
    assert not (tmp_path / "facts" / "broken.json").exists()


def test_a_defect_costs_one_host_over_worker_processes_too(monkeypatch):
    def fake_probe(host, options):  # stands in for SSH only: a defect (exception) in one host's probe
        if host.name == "bad":
            raise KeyError("boom")
        return probe_module.ProbeResult(host.name, None, None, None)

    monkeypatch.setattr(probe_module, "probe_host", fake_probe)
    hosts = [Host("h1"), Host("bad"), Host("h2"), Host("h3")]
    for workers in (1, 2):
        results = probe_hosts(hosts, SshOptions(), forks=2, workers=workers)
        assert [(r.host, r.error_kind) for r in results] == [("h1", None), ("bad", "parse"), ("h2", None), ("h3", None)]
        assert "KeyError" in results[1].error


def test_replay_never_writes_the_live_facts_and_missing_captures_are_not_captured(tmp_path):
    import json
    import shutil

    from conftest import run_cli

    live = tmp_path / "inventory" / "facts"
    live.mkdir(parents=True)
    (live / "good.json").write_text('{"real": "probed facts"}')
    captures = tmp_path / "cap"
    shutil.copytree(Path(__file__).parent / "fixtures" / "captures" / "minsky", captures / "good")
    shutil.copytree(captures / "good", captures / "nonuma")
    (captures / "nonuma" / "numactl-H.txt").unlink()
    done = run_cli("probe", "--replay", "cap", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert (live / "good.json").read_text() == '{"real": "probed facts"}'  # the real host's facts are untouched
    assert json.loads((tmp_path / "cap.facts" / "good.json").read_text())["host"] == "good"
    assert f"facts saved in {tmp_path / 'cap.facts'}/" in done.stdout
    lines = [line for line in done.stderr.splitlines() if line.startswith("nonuma:")]
    assert len(lines) == 1 and "`numactl-H` not captured" in lines[0] and "cannot parse" not in lines[0]
    # the table holds the kind only; the message is that one line, not a wrapped cell printed twice
    assert "not captured" not in done.stdout and "missing" in done.stdout
    done = run_cli("probe", "--replay", "cap", "good", "--facts-dir", "inventory/facts", cwd=tmp_path)
    assert done.returncode == 0 and json.loads((live / "good.json").read_text())["host"] == "good"  # asked for: written


def test_a_typo_of_an_inventory_name_is_refused_before_any_lookup(tmp_path):
    from conftest import run_cli

    inventory = tmp_path / "hosts.yml"
    inventory.write_text("hosts: {w1: {address: 192.0.2.1}, w2: {address: 192.0.2.2}}\ngroups: {gpu: [w1, w2]}\n")
    done = run_cli("probe", "-i", str(inventory), "wl", "--connect-timeout", "0.5")
    assert done.returncode == 2 and "wl: not a host or group" in done.stderr and "did you mean w1" in done.stderr
    assert "resolve" not in done.stderr  # refused before DNS
    done = run_cli("probe", "-i", str(inventory), "gpv", "--connect-timeout", "0.5")
    assert done.returncode == 2 and "did you mean gpu" in done.stderr


# Issue 24 finding 2: a replayed folder may be another user's; nothing in it is followed or published.


def _capture_copy(tmp_path: Path, host: str = "node01") -> Path:
    import shutil

    root = tmp_path / "cap"
    shutil.copytree(Path(__file__).parent / "fixtures" / "captures" / "node-hwloc", root / host)
    return root


def test_replay_refuses_a_capture_linked_to_a_secret_and_copies_nothing(tmp_path):

    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    secret.chmod(0o600)
    root = _capture_copy(tmp_path)
    _capture_copy(tmp_path, "node02")
    (root / "node01" / "hwloc-xml.txt").unlink()
    (root / "node01" / "hwloc-xml.txt").symlink_to(secret)
    done = run_cli("probe", "--replay", str(root))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"node01: refused: {root}/node01/hwloc-xml.txt: is a link" in done.stderr
    saved = tmp_path / "cap.facts"
    assert not any("secret-hash" in p.read_text() for p in saved.rglob("*") if p.is_file())
    assert (saved / "node02").stat().st_mode & 0o777 == 0o700
    assert {p.stat().st_mode & 0o777 for p in (saved / "node02").iterdir()} == {0o600}  # raw copies are not published


def test_replay_refuses_a_fifo_and_a_device_link_without_blocking(tmp_path):
    root = _capture_copy(tmp_path)
    _capture_copy(tmp_path, "node02")
    (root / "node01" / "lscpu.txt").unlink()
    os.mkfifo(root / "node01" / "lscpu.txt")  # on main the replay waits for a writer for ever
    (root / "node02" / "meminfo.txt").unlink()
    (root / "node02" / "meminfo.txt").symlink_to("/dev/zero")  # on main: MemoryError
    one, two = replay(root)
    assert (one.error_kind, two.error_kind) == ("refused", "refused")
    assert "lscpu.txt: is a FIFO" in one.error and "meminfo.txt: is a link" in two.error


def test_replay_refuses_a_host_folder_that_is_a_link(tmp_path):
    root = _capture_copy(tmp_path)
    (root / "node02").symlink_to(root / "node01")
    results = {r.host: r for r in replay(root)}
    assert results["node01"].ok and results["node02"].error_kind == "refused"


def test_replay_never_writes_through_a_planted_facts_folder(tmp_path):

    root = _capture_copy(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "cap.facts").symlink_to(elsewhere)  # the predictable DIR.facts, planted
    done = run_cli("probe", "--replay", str(root))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"cannot save facts: {tmp_path}/cap.facts: is a link" in done.stderr
    assert list(elsewhere.iterdir()) == []


def test_replay_refuses_a_facts_folder_of_another_user(tmp_path):
    import pytest

    if os.geteuid() != 0:
        pytest.skip("chown needs root (CI runs the suite as root)")
    root = _capture_copy(tmp_path)
    planted = tmp_path / "cap.facts"
    planted.mkdir(mode=0o700)
    os.chown(planted, 65534, 65534)  # made first by another user, as in a shared /tmp
    done = run_cli("probe", "--replay", str(root))
    assert done.returncode == 1 and "owned by uid 65534, not by you" in done.stderr
    assert list(planted.iterdir()) == []
