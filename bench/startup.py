#!/usr/bin/env python3
"""Benchmark: how long `provision` takes to start (issue 28: <= 0.3 s for --help, --version and the
start of every command), against Ansible and pyinfra on the same machine in the same run.

Each command line runs REPEAT times (default 15) as its own process, interleaved (one round of
every command, then the next round, so load on a shared machine hits all alike); the median wall
time is printed with its ratio to the 0.3 s goal, to the figure measured before the lazy command
registry (issue 28: 0.56-0.62 s for --help on main ec5d0a7) and to each competitor's start-up:

  provision --help / --version / CMD --help for every command (the start of a command: options
                 parsed, its module imported, nothing done yet)
  provision CMD -i MISSING for every command that reads an inventory, probe --replay MISSING,
                 rankfile --check MISSING (a command started for real: options parsed, settings
                 built, its first step refused with one line and exit 2; the whole path a command
                 takes before work), and capture-script's whole run
  ansible --version, ansible-playbook --help   (ansible-core, from the bench extra)
  pyinfra --help                               (pyinfra 3, from the bench extra)

With --before PATH (a checkout of the old code, e.g. `git archive ec5d0a7 provision | tar -x -C DIR`;
a PYTHONPATH, so `DIR:TYPER29` also puts the typer the old code needs first), the old
`provision --help` and `--version` run in the same rounds (`python -m provision` with PATH on
PYTHONPATH, this venv's other packages) and "vs before" is against them; else against 0.59 s.
Also prints the load average before and after. The console scripts beside this interpreter are
used (`pip install -e '.[bench]'` in a venv, then `.venv/bin/python bench/startup.py`).

    python3 bench/startup.py --repeat 15 --before /tmp/provision-ec5d0a7
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from console import tool  # bench/ is sys.path[0] when run as a script

GOAL = 0.3  # seconds (issue 28)
BEFORE = 0.59  # seconds: `provision --help` median on main ec5d0a7 (issue 28: 0.56-0.62 s)
COMMANDS = (
    "probe",
    "capture-script",
    "rankfile",
    "launch",
    "topology",
    "slurm-nodes",
    "slurm-gres",
    "setup-cluster",
    "doctor",
    "run",
    "inventory",
)


NEUTRAL = tempfile.mkdtemp(prefix="provision-startup-")


def timed(argv: list[str], refused: bool = False) -> float:
    env = {**os.environ, "COLUMNS": "80"}
    # As installed: pip compiles a wheel's modules at install time; with this set (a CI image's habit)
    # an editable checkout would compile every module from source at every start (~70 ms here).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if argv[0].startswith("PYTHONPATH="):
        env["PYTHONPATH"], argv = argv[0].split("=", 1)[1], argv[1:]
    start = time.perf_counter()
    # From an empty folder: `python -m provision` would otherwise import the checkout in the current
    # folder (sys.path[0]) instead of --before's code, and no command sees this checkout's inventory/.
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=NEUTRAL)
    elapsed = time.perf_counter() - start
    if done.returncode != (2 if refused else 0):
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--before", help="PYTHONPATH of the old code (and its typer), run in the same rounds")
    args = parser.parse_args()
    provision = shutil.which(tool("provision"))
    if provision is None:
        raise SystemExit("no provision command: pip install -e '.[bench]'")
    lines: dict[str, list[str]] = {"provision --help": [provision, "--help"], "provision --version": [provision, "--version"]}
    for command in COMMANDS:
        lines[f"provision {command} --help"] = [provision, command, "--help"]
    missing = "/nonexistent/provision-bench"
    starts = {
        "provision probe -i MISSING": [provision, "probe", "-i", missing],
        "provision probe --replay MISSING": [provision, "probe", "--replay", missing],
        "provision rankfile --check MISSING": [provision, "rankfile", "--check", missing],
        "provision launch -i MISSING": [provision, "launch", "-i", missing, "1x1x1", "--", "true"],
        "provision topology -i MISSING": [provision, "topology", "-i", missing, "1x1x1"],
        "provision slurm-nodes -i MISSING": [provision, "slurm-nodes", "-i", missing],
        "provision slurm-gres -i MISSING": [provision, "slurm-gres", "-i", missing],
        "provision setup-cluster -i MISSING": [provision, "setup-cluster", "-i", missing],
        "provision doctor -i MISSING": [provision, "doctor", "-i", missing],
        "provision run -i MISSING": [provision, "run", "-i", missing, "all", "--", "true"],
        "provision inventory import MISSING": [provision, "inventory", "import", missing],
    }
    lines.update(starts)
    lines["provision capture-script (whole run)"] = [provision, "capture-script"]  # prints its script: exit 0
    competitors = {}
    for name, argv in (
        ("ansible --version", ["ansible", "--version"]),
        ("ansible-playbook --help", ["ansible-playbook", "--help"]),
        ("pyinfra --help", ["pyinfra", "--help"]),
    ):
        found = shutil.which(tool(argv[0]))
        if found is None:
            print(f"(no {argv[0]} here: pip install -e '.[bench]')")
            continue
        competitors[name] = [found, *argv[1:]]
    lines.update(competitors)
    if args.before is not None:
        for flag in ("--help", "--version"):
            lines[f"before: provision {flag}"] = [f"PYTHONPATH={args.before}", sys.executable, "-m", "provision", flag]
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in lines}
    for name, argv in lines.items():  # warm the page cache once
        timed(argv, name in starts)
    for _ in range(args.repeat):
        for name, argv in lines.items():
            times[name].append(timed(argv, name in starts))
    load_after = os.getloadavg()
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"start-up, median of {args.repeat} runs, {time.strftime('%Y-%m-%d %H:%M %Z')}, "
        f"{os.cpu_count()} CPUs, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    reference = {name: medians[name] for name in competitors}
    before = {flag: medians.get(f"before: provision {flag}", BEFORE) for flag in ("--help", "--version")}
    header = f"{'command':34} {'median s':>9} {'vs 0.3 s goal':>14} {'vs before':>10}"
    header += "".join(f" {('vs ' + name):>26}" for name in reference)
    print(header)
    for name, median in medians.items():
        row = f"{name:34} {median:9.3f} {median / GOAL:13.2f}x"
        old = before["--version"] if name.endswith("--version") else before["--help"]
        row += f" {median / old:9.2f}x" if name.startswith("provision") else f" {'':>10}"
        row += "".join(f" {median / value:25.2f}x" for value in reference.values())
        print(row)
    worst = max(value for name, value in medians.items() if name.startswith("provision"))
    print(f"slowest provision start: {worst:.3f} s ({'within' if worst <= GOAL else 'OVER'} the {GOAL} s goal)")


if __name__ == "__main__":
    main()
