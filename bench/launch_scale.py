#!/usr/bin/env python3
"""Benchmark: `provision launch --run` with the real mpirun on N sshd containers (16/64/128...).

Starts N containers of the test node image (OpenMPI 4: provision-node:test; 5: provision-node5:test)
on their own Docker network, probes them all, then for each size runs
``provision launch 1xNx1 --allow-no-gpu --report-bindings --run -- sleep 1`` from the first node and
prints the wall time, whether provision's binding check passed (every rank on its planned host
and core) and whether provision turned tree spawn off.

Only the first node holds the MPI user's private key (``--mesh``: every node does), so the nodes
cannot SSH to each other: provision must say so and start mpirun without tree spawn, or mpirun's
daemons would try to reach each other and fail. The machine is shared: the 1-minute load average
is printed with every figure.

Each rank runs ``sleep 1`` (the second is in every figure): PRRTE 3.0 (OpenMPI 5.0.7) can miss the
exit of a rank that ends within milliseconds of its start, and its mpirun then never returns
(one daemon in a few dozen per run; see provision.launch.mpirun._no_tree_spawn).

    python3 bench/launch_scale.py --sizes 16,64,128 --image provision-node:test
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from mpi_nodes import start_mpi_nodes, stop_mpi_nodes  # noqa: E402

PROVISION = [sys.executable, "-m", "provision"]
RANK_PROGRAM = ["sleep", "1"]  # outlives PRRTE 3.0's race on a rank that exits at once


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,64,128")
    parser.add_argument("--image", default="provision-node:test")
    parser.add_argument("--mesh", action="store_true", help="every node holds the key (tree spawn possible)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    prefix = f"ls{os.getpid()}n"
    count = max(sizes)
    with tempfile.TemporaryDirectory(prefix="launch-scale-") as tmp:
        work = Path(tmp)
        try:
            started = time.monotonic()
            names, _ = start_mpi_nodes(prefix, count, args.image, work, args.mesh)
            print(f"{args.image}: {count} containers up in {time.monotonic() - started:.0f}s ({load()})", flush=True)
            common = ["-i", str(work / "hosts.yml"), "--facts-dir", str(work / "facts")]
            common += ["--known-hosts", str(work / "known_hosts")]
            started = time.monotonic()
            probed = subprocess.run([*PROVISION, "probe", *names, *common], capture_output=True, text=True, cwd=work)
            print(f"probe of {count}: exit {probed.returncode} in {time.monotonic() - started:.1f}s ({load()})", flush=True)
            if probed.returncode:
                print(probed.stderr[-2000:])
                return 1
            for size in sizes:
                hosts = ",".join(names[:size])
                started = time.monotonic()
                done = subprocess.run(
                    [*PROVISION, "launch", f"1x{size}x1", "--hosts", hosts, *common, "--allow-no-gpu", "--report-bindings"]
                    + ["--no-doctor"]  # launch alone: doctor's N x N pairwise check is measured by doctor
                    + ["--rankfile", str(work / f"1x{size}x1.rf"), "--run", "--", *RANK_PROGRAM],
                    capture_output=True,
                    text=True,
                    cwd=work,
                    timeout=900,
                )
                took = time.monotonic() - started
                bound = re.search(r"all (\d+) ranks bound as planned", done.stderr)
                no_tree = "no tree spawn" in done.stderr
                print(
                    f"launch --run 1x{size}x1 ({size} hosts, {args.image}): exit {done.returncode}, {took:.1f}s, "
                    f"bindings {'checked: all ' + bound.group(1) + ' as planned' if bound else 'NOT confirmed'}, "
                    f"tree spawn {'off (nodes cannot SSH each other)' if no_tree else 'on'} ({load()})",
                    flush=True,
                )
                if done.returncode or not bound:
                    print(done.stderr[-3000:])
            # The same job with mpirun's default tree spawn, run directly on the first node: what
            # happens without the option provision adds (nodes that cannot SSH to each other).
            hostfile = "".join(f"{name} slots=1\n" for name in names)
            subprocess.run(
                ["docker", "exec", "-i", "-u", "mpi", names[0], "sh", "-c", "cat > /tmp/all.hosts"], input=hostfile, text=True
            )
            started = time.monotonic()
            raw = subprocess.run(
                ["docker", "exec", "-u", "mpi", names[0], "timeout", "120", "mpirun", "-n", str(count)]
                + ["--hostfile", "/tmp/all.hosts", "--map-by", "node", *RANK_PROGRAM],
                capture_output=True,
                text=True,
            )
            said = " ".join((raw.stdout + raw.stderr).split())[:300]
            print(
                f"plain mpirun (tree spawn on) on {count} hosts: exit {raw.returncode} in {time.monotonic() - started:.1f}s"
                f"{' (killed by timeout 120)' if raw.returncode == 124 else ''}: {said!r} ({load()})",
                flush=True,
            )
        finally:
            stop_mpi_nodes(prefix, count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
