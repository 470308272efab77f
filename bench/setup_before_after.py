#!/usr/bin/env python3
"""A no-change `provision setup-cluster` and its floor (`provision run all -- true`) from two
checkouts of provision, alternated on the same 3 sshd containers: what a change did, in one run
(issue 37, item 1).

Each checkout runs as ``python -m provision`` with PYTHONPATH set to it, from a folder outside
both (the interpreter puts the current folder first on its path), with this interpreter's
packages; the nodes are bench/sshd_nodes.py's, with the setup benches' two cluster users,
converged once by the newer checkout. Prints each median and the ratio to its own floor.

    python3 bench/setup_before_after.py --before /path/to/old/checkout --repeat 12
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from sshd_nodes import setup_inventory, start_nodes, stop_nodes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="the older checkout (its top folder)")
    parser.add_argument("--after", type=Path, default=ROOT, help="the newer checkout (default: this one)")
    parser.add_argument("--repeat", type=int, default=12)
    options = parser.parse_args()
    trees = {"before": options.before.resolve(), "after": options.after.resolve()}
    for tree, path in trees.items():  # else the interpreter's own provision would run, silently
        if not (path / "provision" / "__init__.py").is_file():
            parser.error(f"--{tree} {path}: not a checkout of provision (no provision/__init__.py)")
    work = Path(tempfile.mkdtemp(prefix="setup-before-after-"))
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load}, {options.repeat} rounds")
    try:
        _names, ports, key, known = start_nodes("sbefore", 3, work)
        inventory = setup_inventory(work, ports, key)
        common = ["-i", str(inventory), "--known-hosts", str(known), "--forks", "3", "--connect-timeout", "60"]
        commands = {
            "no-change": [sys.executable, "-m", "provision", "setup-cluster", *common, "--no-verify", "--json"],
            "floor": [sys.executable, "-m", "provision", "run", "all", *common, "--", "true"],
        }

        def timed(what: str, tree: str) -> float:
            env = dict(os.environ, PYTHONPATH=str(trees[tree]))
            start = time.perf_counter()
            subprocess.run(commands[what], capture_output=True, env=env, cwd=work, check=True)
            return time.perf_counter() - start

        timed("no-change", "after")  # the first run converges the nodes
        seconds: dict[tuple[str, str], list[float]] = {(w, t): [] for t in trees for w in commands}
        for _ in range(options.repeat):
            for what, tree in seconds:
                seconds[what, tree].append(timed(what, tree))
        median = {k: statistics.median(v) for k, v in seconds.items()}
        for tree, path in trees.items():
            run, floor = median["no-change", tree], median["floor", tree]
            print(f"{tree:6} {path}: no-change {run:.3f} s, floor {floor:.3f} s, {run / floor:.2f}x")
    finally:
        stop_nodes("sbefore", 3)


if __name__ == "__main__":
    main()
