#!/usr/bin/env python3
"""Benchmark: `provision setup-cluster` vs ansible-playbook vs pyinfra doing the same work.

On the same N real sshd containers (the test image) in one run, each tool converges its own two
cluster users (different names and uids, so each tool's first run really creates them):
  provision : `provision setup-cluster --no-verify` (playbooks/setup-cluster.yml), strict host keys
  ansible   : `ansible-playbook bench/setup-cluster-ansible.yml` (ansible-core only; pipelining on,
              ControlPersist 60s: the no-change run reuses the first run's connections)
  pyinfra   : `pyinfra INV bench/setup_cluster_pyinfra.py` twice (stage keys, stage trust)
For each: the first run, then the no-change run (median of --repeat). Prints times and ratios, and
provision's no-change run against the floor, `provision run all -- true` (start-up, the inventory,
one SSH round trip to every host), timed alternately with it.
Needs root (Docker) and the bench extra (`pip install -e '.[bench]'`).

    python3 bench/setup_vs_ansible.py --sizes 16 64 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from console import tool  # noqa: E402
from sshd_nodes import start_nodes, stop_nodes  # noqa: E402

from cluster_support import ensure_docker  # noqa: E402

CONNECT_TIMEOUT = 60  # the same for every tool: the 2-core machine is shared and often overloaded
FLOOR: dict[int, float] = {}  # hosts -> median seconds of `provision run all -- true`, measured beside provision's runs


def users(prefix: str, base: int) -> list[dict]:
    """Two cluster users for one tool."""
    return [{"name": f"{prefix}1", "uid": base + 1}, {"name": f"{prefix}2", "uid": base + 2}]


class ToolFailed(Exception):
    """A tool's run failed; the benchmark reports it and goes on with the others."""


def timed(command: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, subprocess.CompletedProcess]:
    """Run and time a command; a failure raises :class:`ToolFailed` with the output's end."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        errors = [
            line
            for line in (done.stdout + done.stderr).splitlines()
            if "rror" in line or "unreachable=1" in line or "failed=1" in line or '"message": "' in line
        ][:10]
        raise ToolFailed(f"{Path(command[0]).name} exit {done.returncode} after {elapsed:.1f}s: " + " | ".join(errors)[:1500])
    return elapsed, done


def provision_runs(ports, key, known, work, repeat) -> tuple[float, float]:
    """First run and median no-change run of `provision setup-cluster`; checks changed=0."""
    import yaml

    inventory = work / "provision.yml"
    hosts = {name: {"address": "127.0.0.1", "port": port} for name, port in ports.items()}
    inventory.write_text(
        yaml.safe_dump(
            {"defaults": {"user": "mpi", "key": str(key)}, "hosts": hosts, "vars": {"cluster_users": users("pu", 3000)}}
        )
    )
    command = [
        tool("provision"),
        "setup-cluster",
        "-i",
        str(inventory),
        "--known-hosts",
        str(known),
        "--no-verify",
        "--forks",
        str(len(ports)),
        "--connect-timeout",
        str(CONNECT_TIMEOUT),
        "--json",
    ]
    # the floor (issue 37): start-up, the inventory and one SSH round trip to every host, nothing else
    floor = [tool("provision"), "run", "all", "-i", str(inventory), "--known-hosts", str(known)]
    floor += ["--forks", str(len(ports)), "--connect-timeout", str(CONNECT_TIMEOUT), "--json", "--", "true"]
    first, _ = timed(command)
    times, floors = [], []
    for _ in range(repeat):  # alternated, so that both see the same load
        elapsed, done = timed(command)
        recap = json.loads(done.stdout)["recap"]
        assert all(r["changed"] == 0 and r["round_trips"] == 1 for r in recap), recap
        times.append(elapsed)
        elapsed, done = timed(floor)
        assert [h["exit_code"] for h in json.loads(done.stdout)["hosts"]] == [0] * len(ports), done.stdout[-2000:]
        floors.append(elapsed)
    FLOOR[len(ports)] = statistics.median(floors)
    return first, statistics.median(times)


def ansible_runs(ports, key, known, work, repeat) -> tuple[float, float]:
    """First run and median no-change run of ansible-playbook; checks changed=0."""
    (work / "ansible.ini").write_text(
        "[all]\n" + "".join(f"{name} ansible_host=127.0.0.1 ansible_port={port}\n" for name, port in ports.items())
    )
    (work / "vars.json").write_text(json.dumps({"cluster_users": users("au", 3100)}))
    control = Path(tempfile.mkdtemp(prefix="acp", dir="/tmp"))
    (work / "ansible.cfg").write_text(
        f"[defaults]\ninterpreter_python = /usr/bin/python3\nhost_key_checking = True\nstdout_callback = default\ntimeout = {CONNECT_TIMEOUT}\n"  # noqa: E501 - one literal, kept whole to be read or grepped
        f"forks = {len(ports)}\nremote_user = mpi\nprivate_key_file = {key}\n"
        "[ssh_connection]\npipelining = True\n"
        f"ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile={known}\n"
        f"control_path_dir = {control}\n"
    )
    env = {**os.environ, "ANSIBLE_CONFIG": str(work / "ansible.cfg")}
    command = [
        tool("ansible-playbook"),
        "-i",
        str(work / "ansible.ini"),
        "-e",
        f"@{work / 'vars.json'}",
        str(ROOT / "bench" / "setup-cluster-ansible.yml"),
    ]
    try:
        first, _ = timed(command, env)
        times = []
        for _ in range(repeat):
            elapsed, done = timed(command, env)
            changed = [int(n) for n in re.findall(r"changed=(\d+)", done.stdout)]
            assert changed and not any(changed), done.stdout[-2000:]
            times.append(elapsed)
    finally:
        shutil.rmtree(control, ignore_errors=True)
    return first, statistics.median(times)


def pyinfra_runs(ports, key, known, work, repeat) -> tuple[float, float]:
    """First run and median no-change run of pyinfra (two stages each)."""
    data = {
        "ssh_user": "mpi",
        "ssh_key": str(key),
        "ssh_known_hosts_file": str(known),
        "ssh_connect_timeout": CONNECT_TIMEOUT,
        "ssh_strict_host_key_checking": "yes",
        "cluster_users": users("yu", 3200),
    }
    hosts = [(name, {**data, "ssh_hostname": "127.0.0.1", "ssh_port": port}) for name, port in ports.items()]
    (work / "pyinfra_inventory.py").write_text(f"hosts = {hosts!r}\n")
    deploy = ROOT / "bench" / "setup_cluster_pyinfra.py"

    def both() -> tuple[float, str]:
        total, out = 0.0, ""
        for stage in ("keys", "trust"):
            elapsed, done = timed(
                [
                    tool("pyinfra"),
                    "-y",
                    "--parallel",
                    str(len(ports)),
                    "--data",
                    f"stage={stage}",
                    str(work / "pyinfra_inventory.py"),
                    str(deploy),
                ],
                cwd=work,
            )
            total, out = total + elapsed, out + done.stdout + done.stderr
        return total, out

    first, _ = both()
    times = []
    for _ in range(repeat):
        elapsed, out = both()
        totals = re.findall(r"Grand total\s+\d+\s+(\S+)\s+(\S+)", out)
        assert totals and all(success == "-" and error == "-" for success, error in totals), out[-2000:]
        times.append(elapsed)
    return first, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip", nargs="*", default=[], choices=["provision", "ansible", "pyinfra"])
    args = parser.parse_args()
    ensure_docker()
    rows = []
    for size in args.sizes:
        work = Path(tempfile.mkdtemp(prefix=f"setup-bench-{size}-"))
        try:
            _names, ports, key, known = start_nodes("sbench", size, work)
            row = {"hosts": size}
            runs = {"provision": provision_runs, "ansible": ansible_runs, "pyinfra": pyinfra_runs}
            for name, function in runs.items():
                if name in args.skip:
                    continue
                try:
                    row[name] = function(ports, key, known, work, args.repeat)
                    print(f"{size} hosts {name}: first {row[name][0]:.2f} s, no-change {row[name][1]:.2f} s", flush=True)
                except ToolFailed as error:
                    print(f"{size} hosts {name}: FAILED {error}", flush=True)
            rows.append(row)
        finally:
            stop_nodes("sbench", size)
            shutil.rmtree(work, ignore_errors=True)
        print_row(rows[-1])


def print_row(row: dict) -> None:
    """One size: first/no-change seconds per tool, and the no-change ratios against provision."""
    if "provision" not in row:
        return
    first, steady = row["provision"]
    print(f"\n{row['hosts']} hosts (seconds; first run / no-change run, median)")
    for name in ("provision", "ansible", "pyinfra"):
        if name in row:
            print(f"  {name:<10} first {row[name][0]:7.2f}   no-change {row[name][1]:7.2f}")
    if row["hosts"] in FLOOR:
        floor = FLOOR[row["hosts"]]
        print(f"  the floor  `provision run all -- true` {floor:7.2f}")
        print(f"  no-change: provision / the floor = {steady / floor:5.2f}x (goal <= 1.5x)")
    for name in ("ansible", "pyinfra"):
        if name in row:
            print(
                f"  no-change: {name} / provision = {row[name][1] / steady:5.1f}x   "
                f"first run: {name} / provision = {row[name][0] / first:5.1f}x"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
