"""Integration: probe over several worker processes on real sshd gives what one process gives."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from cluster_support import NODES
from conftest import run_cli
from provision.inventory.model import open_inventory
from provision.probe import store
from provision.probe.run import probe_hosts
from provision.transport import parallel
from provision.transport.options import SshOptions

pytestmark = pytest.mark.cluster


def comparable(result):
    facts = dataclasses.replace(result.facts, probed_at="") if result.facts else None
    # Which captures came back and how each exited (their text is checked through the facts:
    # meminfo and numactl -H also show free memory, which changes between two probes).
    captures = {name: c.exit_code for name, c in result.captures.items()}
    return result.host, result.error_kind, result.error, facts, captures


def test_probe_over_worker_processes_same_as_one_process(cluster, cluster_files, monkeypatch):
    inventory, known_hosts = cluster_files
    hosts = open_inventory(inventory).resolve(list(NODES))
    options = SshOptions(known_hosts=known_hosts, connect_timeout=15, command_timeout=120, ssh_config=Path("/dev/null"))
    one = probe_hosts(hosts, options, forks=3, workers=1)
    assert [r.error_kind for r in one] == [None, None, "hostkey", "unreachable", None]

    # Automatic worker count, with a threshold small enough for 5 hosts: 2 processes.
    monkeypatch.setattr(parallel, "PROCESS_THRESHOLD", 2)
    monkeypatch.setattr(parallel, "controller_cores", lambda: parallel.MIN_CORES)
    monkeypatch.setattr(parallel, "ITEMS_PER_WORKER", 2)  # 5 hosts: 2 processes
    used = []
    real = parallel._processes
    monkeypatch.setattr(
        parallel, "_processes", lambda items, work, forks, n, collect: (used.append(n), real(items, work, forks, n, collect))[1]
    )
    done_here = []
    two = probe_hosts(hosts, options, forks=3, on_done=lambda r: done_here.append((r.host, os.getpid())))
    assert used == [2]
    assert [comparable(r) for r in two] == [comparable(r) for r in one]
    assert sorted(done_here) == sorted((n, os.getpid()) for n in NODES)  # progress: in the parent, once per host


def test_probe_cli_with_workers(cluster, cluster_files, tmp_path, monkeypatch):
    inventory, known_hosts = cluster_files
    saved = []
    outputs = {}
    for workers in ("1", "2"):
        facts_dir = tmp_path / f"facts{workers}"
        done = run_cli(
            "probe",
            "-i",
            str(inventory),
            "--known-hosts",
            str(known_hosts),
            "--facts-dir",
            str(facts_dir),
            "--connect-timeout",
            "15",
            "--ssh-config",
            "/dev/null",
            "--forks",
            "3",
            "--workers",
            workers,
            "--json",
            *NODES,
        )
        assert done.returncode == 1, done.stderr
        report = json.loads(done.stdout)["hosts"]
        for host in report:
            if host.get("facts"):
                host["facts"]["probed_at"] = ""
        outputs[workers] = (report, sorted(line for line in done.stderr.splitlines() if ": " in line))
        saved.append(sorted(p.name for p in facts_dir.glob("*.json")))
        for name in ("node1", "node2", "minsky"):
            assert store.load_host(facts_dir, name).host == name
    assert outputs["2"] == outputs["1"]
    assert [h["status"] for h in outputs["2"][0]] == ["ok", "ok", "hostkey", "unreachable", "ok"]
    assert saved == [["minsky.json", "node1.json", "node2.json"]] * 2
