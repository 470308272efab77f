#!/usr/bin/env python3
"""Benchmark: node CPU time of the gather script, whole and per step, in a real node container.

Runs inside one container of the test image (``docker exec``), with no profiler: each script is
run N times by a driver shell, and the driver's ``times`` builtin gives the CPU (user + system)
of all its children. Per step: a script holding only the prologue + that step, minus the
prologue alone. Where the container has strace, it also counts the programs (execs) and
processes (forks) each step starts, from one traced run. CPU times grow when other work shares
the machine: compare figures taken in one run (``--baseline REF`` also measures the script of
git revision REF in the same run, for a ratio).

    python3 bench/gather_cost.py                          # starts and removes its own container
    python3 bench/gather_cost.py --container C --baseline 1e714fd
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from provision.probe.gather import STEPS, gather_script, new_nonce  # noqa: E402

IMAGE = os.environ.get("PROVISION_NODE_IMAGE", "provision-node:test")

DRIVER = r"""
script=$1; n=$2
i=0
while [ $i -lt $n ]; do sh "$script" </dev/null >/dev/null 2>&1; i=$((i+1)); done
times
"""
TRACE = r"""
command -v strace >/dev/null || exit 0
strace -f -qq -e trace=execve,fork,vfork,clone,clone3 -o /tmp/bench.trace sh /tmp/bench.sh </dev/null >/dev/null 2>&1
echo "$(grep -c 'execve(' /tmp/bench.trace) $(grep -cE '(fork|clone3?)[(]' /tmp/bench.trace)"
"""


def seconds(field: str) -> float:
    minutes, rest = field.split("m")
    return int(minutes) * 60 + float(rest.rstrip("s"))


def cost(container: str, script: str, runs: int) -> tuple[float, str]:
    """(ms of CPU per run, "execs/forks" of one run) of ``script`` run ``runs`` times."""
    subprocess.run(
        ["docker", "exec", "-i", container, "sh", "-c", "cat >/tmp/bench.sh; chmod 644 /tmp/bench.sh"],
        input=script,
        text=True,
        check=True,
    )
    out = subprocess.run(
        ["docker", "exec", "-u", "mpi", container, "sh", "-c", DRIVER, "sh", "/tmp/bench.sh", str(runs)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    user, system = (seconds(field) for field in out[1].split())
    traced = subprocess.run(
        ["docker", "exec", "-u", "mpi", container, "sh", "-c", TRACE], capture_output=True, text=True
    ).stdout.split()
    # The traced `sh` itself is one exec; the counts are the script's own.
    counts = f"{int(traced[0]) - 1}/{traced[1]}" if len(traced) == 2 else "-"
    return (user + system) * 1000 / runs, counts


def script_at(revision: str) -> str:
    """The gather script as git revision ``revision`` rendered it (its files unpacked in a scratch folder)."""
    with tempfile.TemporaryDirectory() as scratch:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", revision, "provision", "templates"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", scratch], input=archive, check=True)
        return subprocess.run(
            [
                sys.executable,
                "-c",
                "from provision.probe.gather import gather_script; print(gather_script('0123456789abcdef'), end='')",
            ],
            cwd=scratch,
            capture_output=True,
            text=True,
            check=True,
        ).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--container", help="a running node container (default: start one)")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--baseline", help="also measure the whole script of this git revision")
    args = parser.parse_args()
    container = args.container
    started = None
    if container is None:
        started = container = f"gathercost{os.getpid()}"
        subprocess.run(
            ["docker", "run", "-d", "--rm", "--name", container, "--entrypoint", "sleep", IMAGE, "3600"],
            check=True,
            capture_output=True,
        )
    try:
        prologue = gather_script("0" * 24, steps=())
        empty, _ = cost(container, "", args.runs)
        base, base_counts = cost(container, prologue, args.runs)
        print(f"node CPU per run of the gather script, {args.runs} runs each, in {container}")
        print(f"{'step':<18}{'CPU ms/run':>12}{'execs/forks':>13}")
        total = 0.0
        for step in STEPS:
            script = gather_script("0" * 24, steps=(step,))
            ms, counts = cost(container, script, args.runs)
            total += ms - base
            print(f"{step.name:<18}{ms - base:>12.2f}{counts:>13}")
        print(f"{'(prologue)':<18}{base - empty:>12.2f}{base_counts:>13}")
        print(f"{'(sh start)':<18}{empty:>12.2f}{'1/0':>13}")
        whole, whole_counts = cost(container, gather_script(new_nonce()), args.runs)
        print(f"{'whole script':<18}{whole:>12.2f}{whole_counts:>13}   (steps + prologue + sh start: {total + base:.2f})")
        if args.baseline:
            old, old_counts = cost(container, script_at(args.baseline), args.runs)
            print(f"{'at ' + args.baseline:<18}{old:>12.2f}{old_counts:>13}   (now {old / whole:.2f}x cheaper)")
    finally:
        if started:
            subprocess.run(["docker", "rm", "-f", started], capture_output=True)


if __name__ == "__main__":
    main()
