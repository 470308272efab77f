"""`provision doctor --perf` against the loop a user would script, on the same sshd containers.

How each is configured (one run, the same nodes, one after the other):

- The nodes: doctor --perf's test image (provision-perf:test: the node image plus Debian's iperf3
  3.12; tests/cluster/ensure-perf-image.sh builds it), ``--nodes`` containers (16 and 64 in the
  report) on a Docker network of their own, with node-to-node SSH as ``mpi`` (a healthy cluster,
  :func:`sshd_nodes.start_nodes` with ``peer_ssh``).
- doctor --perf: ``provision doctor --perf --json --timings --forks 64 --pairwise-fanout 1`` (every
  check doctor runs, then the rounds: every pair in N-1 matchings, each test ``iperf3 -t 3
  --bidir``), and again with ``--budget BUDGET`` (60 s by default). Its own ``--timings`` give the
  perf phase's wall time and the pairs planned, tested and measured: every pair is accounted for
  (tested and measured, or said not covered by the budget).
- The competitor: the sequential all-pairs loop a user writes (the way NVIDIA/nccl-tests#106
  describes finding a bad node by hand): for each pair, ``ssh B iperf3 -s -1 -B ADDR_B &``, then
  ``ssh A iperf3 -c ADDR_B -B ADDR_A -t 3 --bidir -J`` (OpenSSH's client, the same key and
  known_hosts), one pair after the other. It is run on every pair with ``--competitor-pairs 0``;
  by default on the first 24 pairs only and its full time extrapolated per pair (printed as
  such): all 2016 pairs of 64 nodes take it over two hours.

Printed: each wall time, the pairs each covered, the ratio competitor / doctor --perf (the perf
phase alone and the whole command), and the load average at the start and the end (the machine is
shared). All nodes share this machine's cores here: 32 iperf3 pairs at once on 2 vCPUs measure the
CPUs, not a network, so the bandwidth figures mean nothing; the wall time and the coverage do.

    python bench/doctor_perf.py [--nodes 16] [--budget 60] [--competitor-pairs 24]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sshd_nodes  # noqa: E402
from doctor_vs_probe import doctor_timings, load, timed  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PERF_IMAGE = os.environ.get("PROVISION_PERF_IMAGE", "provision-perf:test")
SECONDS = 3  # doctor --perf's default test length, used by the competitor too
PORT = 47301


def addresses(names: list[str]) -> dict[str, str]:
    out = subprocess.run(
        ["docker", "inspect", "-f", "{{.Name}} {{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", *names],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.split()[0].lstrip("/"): line.split()[1] for line in out.splitlines()}


def competitor(
    pairs: list[tuple[str, str]], ports: dict[str, int], ips: dict[str, str], key: Path, known: Path
) -> tuple[float, int]:
    """The sequential loop: (wall seconds, pairs measured)."""
    ssh = ["ssh", "-i", str(key), "-o", f"UserKnownHostsFile={known}", "-o", "BatchMode=yes", "-l", "mpi"]
    measured = 0
    started = time.monotonic()
    for index, (a, b) in enumerate(pairs):
        port = PORT + index % 500  # a server whose client never came must not block the next pair's port
        server = subprocess.Popen(
            [*ssh, "-p", str(ports[b]), "127.0.0.1", f"timeout 60 iperf3 -s -1 -B {ips[b]} -p {port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # what a script does: give the server a moment
        client = subprocess.run(
            [*ssh, "-p", str(ports[a]), "127.0.0.1", f"iperf3 -c {ips[b]} -B {ips[a]} -p {port} -t {SECONDS} --bidir -J"],
            capture_output=True,
            text=True,
        )
        try:
            server.wait(timeout=SECONDS + 10)
        except subprocess.TimeoutExpired:  # its client failed: the script moves on
            server.kill()
            server.wait()
        with contextlib.suppress(ValueError):  # a failed pair prints no JSON: not measured
            measured += "sum_received" in json.loads(client.stdout).get("end", {})
    return time.monotonic() - started, measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--budget", type=int, default=60, help="doctor --perf --budget, seconds")
    parser.add_argument("--forks", type=int, default=64)
    parser.add_argument("--competitor-pairs", type=int, default=24, help="pairs the competitor runs (0: all)")
    args = parser.parse_args()
    subprocess.run(["bash", str(ROOT / "tests" / "cluster" / "ensure-perf-image.sh")], check=True)
    sshd_nodes.IMAGE = PERF_IMAGE
    prefix = f"benchperf{os.getpid()}-"
    all_pairs = args.nodes * (args.nodes - 1) // 2
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        network = prefix.rstrip("-")
        subprocess.run(["docker", "network", "create", network], check=True, capture_output=True)
        try:
            names, ports, key, known = sshd_nodes.start_nodes(prefix, args.nodes, work, ("--network", network), peer_ssh=True)
            inventory = work / "hosts.yml"
            lines = ["defaults:", "  user: mpi", f"  key: {key}", "hosts:"]
            lines += [f"  {n}: {{address: 127.0.0.1, port: {ports[n]}}}" for n in names]
            inventory.write_text("\n".join(lines) + "\n")
            common = ["-i", str(inventory), "--known-hosts", str(known), "--forks", str(args.forks), "--pairwise-fanout", "1"]
            load_start = load()
            full_s, full = timed(["provision", "doctor", *common, "--json", "--timings", "--perf"])
            budget_s, budget = timed(
                ["provision", "doctor", *common, "--json", "--timings", "--perf", "--budget", f"{args.budget}s"]
            )
            pairs = list(itertools.combinations(names, 2))
            sample = pairs if args.competitor_pairs == 0 else pairs[: args.competitor_pairs]
            loop_s, loop_measured = competitor(sample, ports, addresses(names), key, known)
            load_end = load()
        finally:
            sshd_nodes.stop_nodes(prefix, args.nodes)
            subprocess.run(["docker", "network", "rm", network], capture_output=True)

    loop_all = loop_s / len(sample) * all_pairs
    print(f"nodes: {args.nodes} ({all_pairs} pairs), forks {args.forks}; load average at start: {load_start}")
    problems = []
    perf_seconds = {}
    for label, wall, done in (("doctor --perf", full_s, full), (f"doctor --perf --budget {args.budget}s", budget_s, budget)):
        timings = doctor_timings(done.stderr)
        perf = timings["perf"]
        perf_seconds[label] = timings["seconds"]["perf"]
        checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]} if done.stdout.strip() else {}
        verdict = checks.get("perf tcp eth0", {})
        print(
            f"{label:32}: {wall:7.1f} s wall (exit {done.returncode}), perf phase {timings['seconds']['perf']:.1f} s; "
            f"{perf['pairs_tested']}/{perf['pairs_total']} pairs tested, {perf['pairs_measured']} measured, "
            f"rounds {perf['rounds_run']}/{perf['rounds_planned']}; perf check: {verdict.get('status')}"
        )
        print(f"{'':34}{verdict.get('detail', '')[-220:]}")
        if perf["pairs_total"] != all_pairs:
            problems.append(f"{label}: {perf['pairs_total']} pairs planned, not {all_pairs}")
        if label == "doctor --perf" and perf["pairs_tested"] != all_pairs:
            problems.append(f"{label}: {perf['pairs_tested']} of {all_pairs} pairs tested")
    extrapolated = "" if len(sample) == all_pairs else f" (measured on {len(sample)} pairs, extrapolated to {all_pairs})"
    label = "sequential ssh+iperf3 loop"
    print(f"{label:32}: {loop_all:7.1f} s for all pairs{extrapolated}; {loop_measured}/{len(sample)} measured")
    print(f"loop / doctor --perf (perf phase)         : {loop_all / perf_seconds['doctor --perf']:.1f}x")
    print(f"loop / doctor --perf (whole command)      : {loop_all / full_s:.1f}x")
    print(f"load average at end: {load_end}")
    if loop_measured != len(sample):
        problems.append(f"the loop measured {loop_measured} of {len(sample)} pairs")
    for problem in problems:
        print(f"NOT ALL WORK DONE: {problem}")
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
