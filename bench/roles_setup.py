#!/usr/bin/env python3
"""Benchmark: `provision setup-cluster` with the NFS, Anaconda and Jupyter roles on the roles test
cluster (3 containers, tests/cluster/roles-compose.yml; the Anaconda installer is the TEST
STAND-IN). Times the first run, the no-change run (median of --repeat) and the no-change run
of the users/SSH plays alone (--tags users,ssh), and prints the ratios and round trips per host.

    python3 bench/roles_setup.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from roles_support import ROLES_NODES, start_roles_cluster, stop_roles_cluster  # noqa: E402
from test_roles_cluster import BOB_PASSWORD, inventory  # noqa: E402


def provision(files, *extra) -> tuple[float, dict]:
    """One run of setup-cluster; (seconds, recap by host)."""
    path, known = files
    command = [
        str(Path(sys.executable).parent / "provision"),
        "setup-cluster",
        "-i",
        str(path),
        "--known-hosts",
        str(known),
        "--json",
        "--no-verify",
        "--ask-jupyter-pass",
        *extra,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, input=BOB_PASSWORD + "\n")
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"setup-cluster failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}")
    return seconds, {r["host"]: r for r in json.loads(done.stdout)["recap"]}


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    project = f"provrolesbench{os.getpid()}"
    with tempfile.TemporaryDirectory() as folder:
        material = Path(folder) / "material"
        try:
            cluster = start_roles_cluster(project, material)
            cluster.docker_exec("r1", "sh", "-c", "mkdir -p /data/imagenet && echo x >/data/imagenet/x")
            files = inventory(cluster, Path(folder))
            first, _ = provision(files)
            again = [provision(files) for _ in range(options.repeat)]
            users = [provision(files, "--tags", "users,ssh") for _ in range(options.repeat)]
        finally:
            stop_roles_cluster(project, material)
    no_change = statistics.median(s for s, _ in again)
    users_only = statistics.median(s for s, _ in users)
    trips = {h: r["round_trips"] for h, r in again[-1][1].items()}
    changed = {h: r["changed"] for h, r in again[-1][1].items()}
    print(f"hosts: {len(ROLES_NODES)} (all roles: users, SSH, NFS, Anaconda, Jupyter)")
    print(f"first run                 {first:7.2f} s")
    print(f"no-change run             {no_change:7.2f} s  (median of {options.repeat}; changed {changed}; round trips {trips})")
    print(f"no-change, users+ssh only {users_only:7.2f} s")
    print(f"first / no-change         {first / no_change:7.1f}x")
    print(f"no-change all / users+ssh {no_change / users_only:7.2f}x")


if __name__ == "__main__":
    main()
