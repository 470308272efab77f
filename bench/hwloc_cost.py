#!/usr/bin/env python3
"""Benchmark: what the `hwloc-xml` step adds to the gather script, measured in a test-cluster node.

Runs inside one node container (image provision-node:test: Debian's hwloc-nox 2.9, numactl,
OpenMPI), interleaving in each round: the whole capture script with and without the hwloc-xml
step, lstopo alone with hwloc's defaults and with --no-io, and the step alone. Prints
medians of wall and CPU time and the ratios. Needs Docker and the node image (tests/run.sh).

    python3 bench/hwloc_cost.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from provision import __version__  # noqa: E402
from provision.probe.gather import STEPS  # noqa: E402
from provision.resources import render  # noqa: E402

IMAGE = "provision-node:test"
STEP = next(step.script for step in STEPS if step.name == "hwloc-xml")

INNER = r"""
import json, os, resource, statistics, subprocess, sys, tempfile, time
job = json.load(sys.stdin)
env = dict(os.environ, LC_ALL="C")
variants = {
    "gather, all steps": (["sh", "-c", job["with"], "sh"], {}, True),
    "gather, no hwloc-xml": (["sh", "-c", job["without"], "sh"], {}, True),
    "lstopo --of xml (hwloc defaults)": (["lstopo-no-graphics", "--of", "xml"], {}, False),
    "the hwloc-xml step": (["sh", "-c", job["step"]], {}, False),
    "lstopo --no-io --of xml": (["lstopo-no-graphics", "--no-io", "--of", "xml"], {}, False),
}
wall = {k: [] for k in variants}; cpu = {k: [] for k in variants}; size = {}
for _ in range(job["rounds"]):
    for name, (argv, extra, into_dir) in variants.items():
        out = tempfile.mkdtemp()
        args = argv + [out] if into_dir else argv
        before = resource.getrusage(resource.RUSAGE_CHILDREN); started = time.perf_counter()
        done = subprocess.run(args, env=dict(env, **extra), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
        wall[name].append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        size[name] = len(done.stdout)
print(json.dumps({k: [statistics.median(wall[k]), statistics.median(cpu[k]), size[k]] for k in variants}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with_hwloc = render("gather.sh.j2", mode="dir", steps=STEPS, nonce="", version=__version__)
    without = render("gather.sh.j2", mode="dir", steps=[s for s in STEPS if s.name != "hwloc-xml"], nonce="", version=__version__)
    job = json.dumps({"with": with_hwloc, "without": without, "rounds": args.rounds, "step": STEP})
    inner = subprocess.run(
        ["docker", "run", "--rm", "-i", "--entrypoint", "python3", IMAGE, "-c", INNER],
        input=job,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(inner.stdout)
    cpus = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "nproc", IMAGE], capture_output=True, text=True
    ).stdout.strip()
    print(f"node container ({cpus} CPUs), medians of {args.rounds} interleaved rounds:")
    for name, (wall, cpu, size) in result.items():
        print(f"  {name:40s} wall {wall * 1000:6.1f} ms  cpu {cpu * 1000:6.1f} ms  stdout {size} B")
    with_, without_ = result["gather, all steps"], result["gather, no hwloc-xml"]
    default, tuned = result["lstopo --of xml (hwloc defaults)"], result["the hwloc-xml step"]
    print(
        f"gather with / without hwloc-xml: wall {with_[0] / without_[0]:.2f}x, cpu {with_[1] / without_[1]:.2f}x "
        f"(+{(with_[0] - without_[0]) * 1000:.1f} ms wall per node)"
    )
    print(f"lstopo with hwloc's defaults / the step: wall {default[0] / tuned[0]:.2f}x, cpu {default[1] / tuned[1]:.2f}x")


if __name__ == "__main__":
    main()
