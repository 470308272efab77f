"""Probe orchestration: localhost for real, replay, bounded parallelism, failures isolated."""

import threading
from pathlib import Path

from provision.connection import SshOptions
from provision.inventory import Host
from provision import probe as probe_module
from provision.probe import probe_hosts, replay


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
