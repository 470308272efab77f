"""`provision probe`'s view of large runs (issue 28 item 4) and the RDMA column (issue 26): above
32 hosts, or with --quiet, hosts alike fold into one line and failures into one line per distinct
error; --table brings the per-host table back. Replayed real captures (tests/fixtures/captures:
node-hwloc from a container, minsky from the source document's S822LC)."""

from __future__ import annotations

import dataclasses
import shutil

from conftest import FIXTURES, run_cli
from provision.cli.probe_view import TABLE_LIMIT, failure_groups, summary_lines, use_summary
from provision.facts.model import RdmaDevice, RdmaPort
from provision.probe.report import nic_summary
from provision.probe.run import replay

IB = RdmaPort(1, "ACTIVE", "LinkUp", "InfiniBand", "200 Gb/sec (4X HDR)")  # ibstat's/sysfs' words
ROCE = RdmaPort(1, "ACTIVE", "LinkUp", "Ethernet", "100 Gb/sec (4X EDR)")


def cluster(tmp_path, alike: int, other: int = 0, broken: int = 0):
    """A capture folder: ``alike`` copies of node-hwloc, ``other`` of minsky, ``broken`` empty hosts."""
    root = tmp_path / "cap"
    for index in range(1, alike + 1):
        shutil.copytree(FIXTURES / "captures" / "node-hwloc", root / f"node{index:02d}")
    for index in range(1, other + 1):
        shutil.copytree(FIXTURES / "captures" / "minsky", root / f"minsky{index}")
    for index in range(1, broken + 1):
        (root / f"bad{index}").mkdir(parents=True)
    return root


def test_rdma_ports_counted_by_kind_and_rate():
    """An 8-rail node with a RoCE port and a port down: one short cell, not ten lines."""
    [minsky] = replay(FIXTURES / "captures", ["minsky"])  # a real host's facts, its RDMA replaced by the ports under test
    down = dataclasses.replace(IB, state="DOWN")
    ports = [RdmaDevice(f"mlx5_{i}", None, None, (IB,)) for i in range(8)]
    ports += [RdmaDevice("mlx5_8", None, None, (ROCE,)), RdmaDevice("mlx5_9", None, None, (down,))]
    assert nic_summary(dataclasses.replace(minsky.facts, rdma=tuple(ports))) == "8× IB 200 Gb/sec, 1× RoCE 100 Gb/sec, 1× DOWN"
    assert nic_summary(dataclasses.replace(minsky.facts, rdma=())) == "-"


def test_summary_groups_hosts_alike_and_failures_by_error(tmp_path):
    results = replay(cluster(tmp_path, alike=40, other=2, broken=3))
    lines = summary_lines(results)
    assert lines[0] == "45 hosts: 42 ok, 3 failed"
    header, first, second = lines[1:4]
    assert header.split()[:4] == ["hosts", "names", "arch", "S×C×T"]
    assert first.split()[:4] == ["40", "node[01-40]", "x86_64", "1x2x1"]  # the largest group first
    assert second.split()[:3] == ["2", "minsky[1-2]", "unknown"] and "2x10x8" in second
    assert any(line.startswith("2 of 42 hosts differ from the majority (40 hosts)") for line in lines)
    [failed] = failure_groups(results)
    assert failed.startswith("bad[1-3]: missing: ") and failed.endswith("/<host> holds no capture files")  # one error: one line


def test_summary_above_the_table_limit_or_quiet(tmp_path):
    results = replay(cluster(tmp_path, alike=2))
    assert not use_summary(results, quiet=False, table=False) and use_summary(results, quiet=True, table=False)
    many = results * (TABLE_LIMIT // 2 + 1)
    assert use_summary(many, quiet=False, table=False) and not use_summary(many, quiet=False, table=True)


def test_summary_escapes_node_text_as_every_other_view_does(tmp_path):
    """The summary's GPU cell and a failure's message go through provision.text.shown, as the
    table does: each control character written as its escape (seen, not obeyed, not lost), the
    bidi override U+202E too (a '?' for C0/C1 alone let it reorder the admin's line)."""
    root = cluster(tmp_path, alike=1)
    gpu = "0, Tesla V100\x1b]52;c;cm0gLXJm\x07\u202eevil, 00000000:04:00.0, 16160 MiB\n"
    (root / "node01" / "nvidia-smi-query.txt").write_text(gpu)
    (root / "bad\u202e1").mkdir()
    results = replay(root)
    text = "\n".join(summary_lines(results) + failure_groups(results))
    assert "V100\\x1b]52;c;cm0gLXJm\\x07\\u202eevil" in text and "bad\\u202e1" in text
    assert not any(ch in text for ch in "\x1b\x07\u202e")


def test_probe_prints_the_summary_for_a_large_run_and_the_table_on_request(tmp_path):
    root = cluster(tmp_path, alike=TABLE_LIMIT + 1, broken=1)
    done = run_cli("probe", "--replay", str(root), "--no-save")
    assert done.returncode == 1  # one host failed
    assert done.stdout.splitlines()[0] == f"{TABLE_LIMIT + 2} hosts: {TABLE_LIMIT + 1} ok, 1 failed", done.stdout
    assert "┃ host" not in done.stdout and f"node[01-{TABLE_LIMIT + 1}]" in done.stdout
    assert done.stderr.count("bad1: missing:") == 1 and "<host> holds no capture files" in done.stderr
    table = run_cli("probe", "--replay", str(root), "--no-save", "--table")
    assert "host" in table.stdout.splitlines()[2] and table.stdout.count("node") >= TABLE_LIMIT + 1
    quiet = run_cli("probe", "--replay", str(root), "node01", "node02", "--no-save", "--quiet")
    assert quiet.returncode == 0 and quiet.stdout.splitlines()[0] == "2 hosts: 2 ok", quiet.stdout
