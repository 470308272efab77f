#!/usr/bin/env python3
"""Where a no-change `provision setup-cluster` spends its time, beside the floor (issue 37, item 1).

On 3 plain sshd containers (bench/sshd_nodes.py, two cluster users as bench/setup_vs_ansible.py
makes them): one first run, then --repeat no-change runs, each in a child interpreter whose
phases are stamped (no profiler: the figures are the real run's): the interpreter and provision's
imports, reading the playbook, each host's SSH handshake (``open``: with the shipped playbook it
starts before the playbook is read, in the background), `prepare` (the typo check over every
variable the playbooks and templates read, and each task's prediction), and `run` with each
host's round trip (sudo and the node's script, once its handshake is done). Each run is followed
by the floor, `provision run all -- true`. Needs root (Docker) and the bench extra.

    python3 bench/setup_timeline.py --repeat 5
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
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from console import tool  # noqa: E402
from sshd_nodes import setup_inventory, start_nodes, stop_nodes  # noqa: E402

# The child: provision's own CLI, with its phases stamped (seconds since the interpreter started
# running this code; the interpreter's own start is in the whole run's time, measured outside).
STAMPED = r"""
import json, sys, time
t0 = time.perf_counter()
marks = []
def mark(name, at=None):
    marks.append((name, time.perf_counter() - t0 if at is None else at))
import provision.engine.runner as runner, provision.transport.session as session, provision.cluster_setup as setup
prepare, run, round_trip, read_names = runner.Runner.prepare, runner.Runner.run, session.Session.run, runner.read_names
def timed(name, function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            who = f"{name} {args[0].host.name}" if name in ("round trip", "open") else name
            mark(who + " start", start - t0)
            mark(who + " took", time.perf_counter() - start)
    return wrapper
runner.Runner.prepare, runner.Runner.run = timed("prepare", prepare), timed("run", run)
session.Session.run, runner.read_names = timed("round trip", round_trip), timed("read_names", read_names)
opened = session.Session.open
def open_once(self):  # the handshake's own time: a later open() of a connected session is not stamped
    return opened(self) if self._connection is not None else timed("open", opened)(self)
session.Session.open, setup.load_playbook = open_once, timed("load_playbook", setup.load_playbook)
mark("imported")
from provision.cli import command_line  # what the provision command runs, its way out included
sys.argv = ["provision", *sys.argv[1:]]
try:
    command_line()
except SystemExit:
    pass
mark("end")
print(json.dumps(marks), file=sys.stderr)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # bytecode cached, as a wheel has it
    work = Path(tempfile.mkdtemp(prefix="setup-timeline-"))
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load}: seconds of each no-change run")
    try:
        _names, ports, key, known = start_nodes("stimeline", 3, work)
        inventory = setup_inventory(work, ports, key)
        common = ["-i", str(inventory), "--known-hosts", str(known), "--forks", "3", "--connect-timeout", "60"]
        setup = ["setup-cluster", *common, "--no-verify", "--json"]
        subprocess.run([tool("provision"), *setup], capture_output=True, env=env, check=True)
        totals, floors = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", STAMPED, *setup], capture_output=True, text=True, env=env)
            totals.append(time.perf_counter() - start)
            marks = json.loads(done.stderr.strip().splitlines()[-1])
            start = time.perf_counter()
            subprocess.run([tool("provision"), "run", "all", *common, "--", "true"], capture_output=True, env=env, check=True)
            floors.append(time.perf_counter() - start)
            print(f"whole {totals[-1]:.3f}, floor {floors[-1]:.3f} | " + ", ".join(f"{name} {at:.3f}" for name, at in marks))
        total, floor = statistics.median(totals), statistics.median(floors)
        print(f"median: no-change {total:.3f} s, the floor {floor:.3f} s: {total / floor:.2f}x (goal <= 1.5x)")
    finally:
        stop_nodes("stimeline", 3)


if __name__ == "__main__":
    main()
