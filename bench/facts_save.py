#!/usr/bin/env python3
"""Benchmark: the cost of saving probed facts (issue 28 item 2), this checkout against a git revision.

Saves N hosts' facts (the real captures of tests/fixtures/captures/node-hwloc, 13 files per host)
into a fresh folder, as `provision probe` does after a run, with the code of this checkout and of
``--baseline REF`` (default: main's ec5d0a7, one fsync per file), each in its own process, in one run,
alternating, ``--rounds`` times. Counts the fsync(2) and syncfs(2) calls each made (by wrapping
them) and prints wall and CPU seconds, best of the rounds, and the ratio baseline / this checkout.
Wall time depends on the disk and on what else writes to it: compare figures from one run.

    python3 bench/facts_save.py                   # 128 hosts, baseline ec5d0a7
    python3 bench/facts_save.py --hosts 256 --baseline main --rounds 5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run in a child process with the tree to measure first on sys.path.
CHILD = r"""
import json, os, sys, tempfile, time, dataclasses
sys.path.insert(0, sys.argv[1])
hosts, folder = int(sys.argv[2]), sys.argv[3]
from provision.probe.gather import CAPTURE_NAMES, Capture
from provision.probe.run import facts_from_captures
import provision.probe.store as store
captured = os.path.join(sys.argv[4], "tests", "fixtures", "captures", "node-hwloc")
paths = {n: os.path.join(captured, n + ".txt") for n in CAPTURE_NAMES}
texts = {n: open(path).read() for n, path in paths.items() if os.path.exists(path)}
captures = {n: Capture(n, 0, texts[n], "") if n in texts else Capture(n, 127, "", "") for n in CAPTURE_NAMES}
facts = facts_from_captures("node-hwloc", captures).facts
batch = [(dataclasses.replace(facts, host=f"node{i:04d}"), captures) for i in range(hosts)]
calls = {"fsync": 0, "syncfs": 0}
real_fsync = os.fsync
def counted_fsync(fd):
    calls["fsync"] += 1
    return real_fsync(fd)
os.fsync = counted_fsync
try:
    import provision.files as files
    real_syncfs = files._syncfs
    def counted_syncfs(fd):
        calls["syncfs"] += 1
        return real_syncfs(fd)
    files._syncfs = counted_syncfs
except (ImportError, AttributeError):
    pass  # a revision without syncfs
wall, cpu = time.perf_counter(), time.process_time()
if hasattr(store, "save_hosts"):
    assert not store.save_hosts(__import__("pathlib").Path(folder), batch)
else:
    for one, caps in batch:
        store.save_host(__import__("pathlib").Path(folder), one, caps)
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, **calls}))
"""


def measure(tree: Path, hosts: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="facts-save-") as scratch:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(tree), str(hosts), str(Path(scratch) / "facts"), str(ROOT)],
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=128)
    parser.add_argument("--baseline", default="ec5d0a7", help="git revision to compare with (default: ec5d0a7)")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="facts-save-base-") as base:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", options.baseline], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", base], input=archive.stdout, check=True)
        results: dict[str, list[dict]] = {options.baseline: [], "this checkout": []}
        for _ in range(options.rounds):
            results[options.baseline].append(measure(Path(base), options.hosts))
            results["this checkout"].append(measure(ROOT, options.hosts))
    print(f"saving {options.hosts} hosts' facts (13 files each), best of {options.rounds} rounds, alternating")
    print(f"{'code':<16}{'fsync':>8}{'syncfs':>8}{'wall s':>9}{'CPU s':>8}")
    best = {}
    for name, runs in results.items():
        best[name] = min(runs, key=lambda r: r["wall"])
        cpu = min(r["cpu"] for r in runs)
        print(f"{name:<16}{best[name]['fsync']:>8}{best[name]['syncfs']:>8}{best[name]['wall']:>9.3f}{cpu:>8.3f}")
    ratio = best[options.baseline]["wall"] / best["this checkout"]["wall"]
    print(f"wall: {options.baseline} / this checkout = {ratio:.1f}x")


if __name__ == "__main__":
    main()
