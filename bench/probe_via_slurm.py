#!/usr/bin/env python3
"""Benchmark: `provision probe --via slurm` against the SSH probe on the same Slurm nodes (issue 18).

Starts the test Slurm cluster (tests/slurm_support.py: slurmctld on ctl, slurmd on sn1-sn3, in
containers on this machine), then alternates, ``--runs`` times each:
  ssh   : `provision probe sn1 sn2 sn3` (one SSH connection per node, from this controller)
  slurm : `provision probe --via slurm --nodes 3 --via-host ctl` (one SSH connection to the
          submit host ctl, which runs salloc + one srun task per node)
Both through the CLI (process start included), facts not saved. Every run must reach every node
with the same facts (checked). Prints each run's wall time, the medians and the ratio
slurm/ssh. The cluster is removed at the end. On 3 local containers SSH is cheap and salloc
+ srun pay Slurm's allocation and step set-up; the gain is in connections: --via slurm makes
one, however many nodes (slurmd's tree fans out), the SSH probe one per node.

    python3 bench/probe_via_slurm.py --runs 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from slurm_support import NODES, start_slurm_cluster, stop_slurm_cluster  # noqa: E402


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["provision", *args], capture_output=True, text=True, timeout=300)


def timed(args: list[str]) -> tuple[float, dict[str, dict]]:
    started = time.monotonic()
    done = run_cli(*args)
    seconds = time.monotonic() - started
    if done.returncode:
        sys.exit(f"provision {' '.join(args)} failed: {done.stderr}")
    hosts = {h["host"]: h["facts"] for h in json.loads(done.stdout)["hosts"]}
    for facts in hosts.values():
        facts.pop("probed_at")
    return seconds, hosts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    cluster = start_slurm_cluster(run_cli)
    try:
        common = ["-i", str(cluster.inventory), "--known-hosts", str(cluster.known_hosts), "--json", "--no-save"]
        ssh = ["probe", *NODES, *common]
        slurm = ["probe", "--via", "slurm", "--nodes", str(len(NODES)), "--via-host", "ctl", "--accept-new-host-keys", *common]
        timed(slurm)  # ctl's host key, Slurm's first job
        times: dict[str, list[float]] = {"ssh": [], "slurm": []}
        for _ in range(runs):
            for name, args in (("ssh", ssh), ("slurm", slurm)):
                seconds, facts = timed(args)
                times[name].append(seconds)
                if name == "ssh":
                    reference = facts
                elif facts != reference:
                    sys.exit("--via slurm gave other facts than the SSH probe")
        for name, values in times.items():
            print(f"{name:5}: " + " ".join(f"{v:.2f}" for v in values) + f"  median {statistics.median(values):.2f} s")
        ratio = statistics.median(times["slurm"]) / statistics.median(times["ssh"])
        print(f"slurm/ssh wall time (median of {runs}, {len(NODES)} nodes, same facts): {ratio:.2f}")
        print(f"SSH connections from this controller: ssh {len(NODES)}, slurm 1")
    finally:
        stop_slurm_cluster(cluster)


if __name__ == "__main__":
    main()
