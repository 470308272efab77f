"""`provision probe --via slurm` on the real Slurm cluster (tests/slurm_support.py: ctl + sn1-sn3).

salloc/srun run on `ctl` (the submit host, reached over SSH as --via-host); the facts must be
the SSH probe's; a hostile node, a node whose task dies, and a partition or node that does not
exist each cost one clear line and never the other nodes' facts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cluster_support import TESTS_DIR
from conftest import run_cli
from slurm_support import NODES

pytestmark = pytest.mark.cluster

STANDINS = TESTS_DIR / "cluster"


def probe_via_slurm(cluster, facts_dir: Path, *options: str):
    done = run_cli(
        "probe", "--via", "slurm", "--via-host", "ctl", "--accept-new-host-keys", "-i", str(cluster.inventory), "--known-hosts",
        str(cluster.known_hosts), "--facts-dir", str(facts_dir), "--json", *options,
    )  # fmt: skip
    return done, {host["host"]: host for host in json.loads(done.stdout)["hosts"]} if done.stdout else {}


def ssh_facts(cluster, node: str) -> dict:
    facts = json.loads((cluster.facts_dir / f"{node}.json").read_text())
    facts.pop("probed_at")
    return facts


# What changes between two captures of the same node: hwloc's memory sizes of the moment.
_MEMORY_OF_THE_MOMENT = re.compile(rb'(local_memory|count)="[0-9]+"')


def steady(capture: bytes) -> bytes:
    """A capture without the memory figures that change from one second to the next."""
    return _MEMORY_OF_THE_MOMENT.sub(rb'\1="N"', capture)


def same_as_ssh(cluster, host: dict) -> bool:
    facts = dict(host["facts"])
    facts.pop("probed_at")
    return facts == ssh_facts(cluster, host["host"])


def test_probe_via_slurm_gives_the_ssh_probes_facts(slurm_cluster, tmp_path):
    done, hosts = probe_via_slurm(slurm_cluster, tmp_path / "facts", "--partition", "gpu", "--nodes", "3")
    assert done.returncode == 0, done.stderr
    assert list(hosts) == list(NODES)
    for node in NODES:
        assert hosts[node]["status"] == "ok" and same_as_ssh(slurm_cluster, hosts[node]), node
        saved = json.loads((tmp_path / "facts" / f"{node}.json").read_text())
        assert saved["hostname"] == node and len(saved["gpus"]) == 2
        # The raw captures are the SSH probe's, byte for byte (all but the free memory).
        for capture in ("lscpu", "hwloc-xml", "nvidia-smi-topo", "ip-addr"):
            ours = tmp_path / "facts" / node / f"{capture}.txt"
            if ours.exists():
                theirs = (slurm_cluster.facts_dir / node / f"{capture}.txt").read_bytes()
                assert steady(ours.read_bytes()) == steady(theirs), (node, capture)


def test_a_nodelist_chooses_the_nodes(slurm_cluster, tmp_path):
    done, hosts = probe_via_slurm(slurm_cluster, tmp_path / "facts", "--nodelist", "sn[1,3]")
    assert done.returncode == 0, done.stderr
    assert list(hosts) == ["sn1", "sn3"] and all(same_as_ssh(slurm_cluster, h) for h in hosts.values())


def test_a_hostile_node_that_knows_the_nonce_forges_no_other_nodes_frames(slurm_cluster, tmp_path):
    copy = [
        ("standins/oddnode/lscpu", "/usr/local/lib/oddnode-lscpu"),
        ("slurm/standins/lscpu-forger", "/usr/local/bin/lscpu"),
    ]
    for source, target in copy:
        slurm_cluster.copy_in("sn3", STANDINS / source, target)
    slurm_cluster.exec(
        "sn3", "sh", "-c", "chmod 755 /usr/local/bin/lscpu /usr/local/lib/oddnode-lscpu && touch /tmp/forge", user="root"
    )
    try:
        done, hosts = probe_via_slurm(slurm_cluster, tmp_path / "facts", "--nodes", "3")
        forged_into = slurm_cluster.exec("sn3", "cat", "/tmp/forged", check=False).stdout.split()
    finally:
        slurm_cluster.exec(
            "sn3", "rm", "-f", "/usr/local/bin/lscpu", "/usr/local/lib/oddnode-lscpu", "/tmp/forge", "/tmp/forged", user="root"
        )
    assert forged_into, "the hostile stand-in wrote its forged task-0 lines into no stream"
    assert done.returncode == 1, done.stderr
    assert hosts["sn1"]["status"] == "ok" and hosts["sn1"]["facts"]["hostname"] == "sn1"
    assert same_as_ssh(slurm_cluster, hosts["sn1"]) and same_as_ssh(slurm_cluster, hosts["sn2"])
    assert hosts["sn3"]["status"] == "parse" and "not the base64 its task sent" in hosts["sn3"]["error"]
    assert "sn3: parse: cannot parse `probe` output: stdout is not the base64" in done.stderr
    assert "forged" not in "".join(p.read_text() for p in (tmp_path / "facts").rglob("*") if p.is_file())
    assert not (tmp_path / "facts" / "sn3.json").exists()


def test_a_task_that_dies_on_one_node_costs_that_node_only(slurm_cluster, tmp_path):
    # On sn2, lscpu kills the shell running the gather script half way: its parent is the $(...)
    # that gathers the steps' stdout (templates/commands/gather.sh.j2), whose parent is the task's shell.
    stand_in = '#!/bin/sh\\nkill -KILL $PPID $(cut -d" " -f4 /proc/$PPID/stat)\\n'
    slurm_cluster.exec(
        "sn2", "sh", "-c", f"printf '{stand_in}' >/usr/local/bin/lscpu && chmod 755 /usr/local/bin/lscpu", user="root"
    )
    try:
        done, hosts = probe_via_slurm(slurm_cluster, tmp_path / "facts", "--nodes", "3")
    finally:
        slurm_cluster.exec("sn2", "rm", "-f", "/usr/local/bin/lscpu", user="root")
    assert done.returncode == 1, done.stderr
    assert same_as_ssh(slurm_cluster, hosts["sn1"]) and same_as_ssh(slurm_cluster, hosts["sn3"])
    # each stream leaves the node in one piece once the steps are done (issue 37): a task killed
    # before that sent nothing (what srun and the task's shell said of it is quoted when they say
    # something: tests/test_probe_slurm.py)
    assert hosts["sn2"]["status"] == "slurm", hosts["sn2"]
    assert "no output from its srun task" in hosts["sn2"]["error"], hosts["sn2"]
    assert [line for line in done.stderr.splitlines() if line.startswith("sn2: slurm: ")], done.stderr
    assert sorted(p.name for p in (tmp_path / "facts").glob("*.json")) == ["sn1.json", "sn3.json"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ("--partition", "nope", "--nodes", "1"),
            "slurm on ctl: no allocation: salloc: error: invalid partition specified: nope",
        ),
        (("--nodelist", "sn9"), "slurm on ctl: no allocation: salloc: error: Job submit/allocate failed: Invalid node name"),
        (("--partition", "gpu;id", "--nodes", "1"), "--partition 'gpu;id': not a Slurm partition name"),
    ],
)
def test_a_partition_or_node_that_does_not_exist_is_one_line_exit_2(slurm_cluster, tmp_path, options, message):
    done, _ = probe_via_slurm(slurm_cluster, tmp_path / "facts", *options)
    assert done.returncode == 2 and f"provision: error: {message}" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "facts").exists()
