"""`provision doctor` beside `provision probe` on the same healthy sshd containers (default 64).

How each is configured (one run, the same nodes, one after the other):

- The nodes: the test cluster's image (provision-node:test, OpenSSH 9.2 of Debian bookworm),
  ``NODES`` containers on a Docker network of their own, named ``benchdoctorPID-NNN`` (Docker's
  DNS resolves these names on that network: they are the inventory names, the names a rank file
  uses). Each node's host key is made before it starts; every node gets an
  /etc/ssh/ssh_known_hosts holding every node's key under its name, and user ``mpi`` gets one
  key pair whose public half is in its authorized_keys (as tests/cluster/entrypoint.sh does), so
  node-to-node SSH as mpi works with ``BatchMode=yes``: a healthy cluster, where the pairwise
  step does all its work (a full login and a command on every ordered pair) and every pair passes.
- The controller: the installed CLI, as user ``mpi``, ``--known-hosts`` holding every node's key
  (strict checking), ``--forks FORKS`` (default 64: every node at once).
- probe: ``provision probe --no-save --json`` (one connection, one round trip per node).
- doctor: ``provision doctor --json --timings --pairwise-fanout F`` (no --user: the login user
  mpi; no --dataset). F defaults to 1 here, not doctor's 8: all the nodes share this machine's
  cores, and 64 nodes x 8 clients = 512 handshakes at once starve each past ssh's 10 s
  ConnectTimeout (measured: 2227 of 4032 pairs timed out), while 64 at once keep the cores as
  busy; on a real cluster each node has its own cores and 8 is the default.
  ``--timings`` makes doctor print its own phase wall times (gather: its round trip on every
  node; pairwise: every node's SSH to every peer, all nodes at once; checks: the comparison
  here) and the work done: nodes gathered, pairs the nodes reported on and how many connected.

The script checks that each tool did all the work: probe returned facts for every node, doctor
ran all its checks (those that need --dataset aside), gathered every node and reported
NODES x (NODES-1) pairs, each connected. It prints every figure, the two ratios of the issue's
goal (doctor gather / probe; doctor total / (1.5 x probe + pairwise)) and the load average at
the start and the end (the machine is shared). Note: here every node shares the controller's
cores, so the pairwise phase costs all N x (N-1) logins on those cores; on a real cluster each
node does its N-1 logins (and serves N-1) on its own CPUs. And every container's ARP entries
count against one kernel-wide neighbour table (net.ipv4.neigh.default.gc_thresh3, 1024 by
default): N x (N-1) pairs above it overflow it ("neighbor table overflow" in dmesg) and some
connections time out; the script says so when that limit is below N x (N-1) (it changes no
kernel setting: the machine is shared).

    python bench/doctor_vs_probe.py [--nodes 64] [--forks 64]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from console import tool  # noqa: E402
from sshd_nodes import start_nodes, stop_nodes  # noqa: E402

# Every check doctor runs without --dataset (provision.doctor.runner.run_checks).
CHECKS = ("reach + job user", "pairwise ssh", "software", "hardware", "limits", "names", "network", "rdma", "time", "gpu health")


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``argv`` (``provision`` being the console script beside this interpreter, as installed
    in the venv that runs the bench, not whatever is first on PATH) and time it."""
    argv = [tool(argv[0]), *argv[1:]]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    return time.monotonic() - started, done


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def doctor_timings(stderr: str) -> dict:
    for line in stderr.splitlines():
        if line.startswith('{"doctor_timings"'):
            return json.loads(line)["doctor_timings"]
    raise SystemExit(f"doctor printed no timings:\n{stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--forks", type=int, default=64)
    parser.add_argument("--pairwise-fanout", type=int, default=1, help="doctor --pairwise-fanout (ssh clients per node)")
    args = parser.parse_args()
    prefix = f"benchdoctor{os.getpid()}-"
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        network = prefix.rstrip("-")
        subprocess.run(["docker", "network", "create", network], check=True, capture_output=True)
        try:
            names, ports, key, known = start_nodes(prefix, args.nodes, work, ("--network", network), peer_ssh=True)
            inventory = work / "hosts.yml"
            lines = ["defaults:", "  user: mpi", f"  key: {key}", "hosts:"]
            lines += [f"  {n}: {{address: 127.0.0.1, port: {ports[n]}}}" for n in names]
            inventory.write_text("\n".join(lines) + "\n")
            common = ["-i", str(inventory), "--known-hosts", str(known), "--forks", str(args.forks)]
            load_start = load()
            probe_s, probe = timed(["provision", "probe", *common, "--no-save", "--json"])
            fanout = ["--pairwise-fanout", str(args.pairwise_fanout)]
            doctor_s, doctor = timed(["provision", "doctor", *common, "--json", "--timings", *fanout])
            load_end = load()
        finally:
            stop_nodes(prefix, args.nodes)
            subprocess.run(["docker", "network", "rm", network], capture_output=True)

    probed = json.loads(probe.stdout) if probe.stdout.strip() else {"hosts": []}
    probe_ok = sum(1 for r in probed["hosts"] if r.get("facts"))
    checks = {c["name"]: c for c in json.loads(doctor.stdout)} if doctor.stdout.strip() else {}
    timings = doctor_timings(doctor.stderr)
    seconds = timings["seconds"]
    gather, pairwise = seconds["gather"], seconds["pairwise"]
    total = gather + pairwise + seconds["checks"]
    pairs = args.nodes * (args.nodes - 1)

    print(
        f"nodes: {args.nodes}, forks: {args.forks}, pairwise fanout: {args.pairwise_fanout}; load average at start: {load_start}"
    )
    print(f"provision probe          : {probe_s:7.2f} s wall (exit {probe.returncode}; {probe_ok}/{args.nodes} hosts with facts)")
    print(f"provision doctor         : {doctor_s:7.2f} s wall (exit {doctor.returncode}; the command, start-up included)")
    print(f"  gather phase           : {gather:7.2f} s ({timings['nodes_gathered']}/{args.nodes} nodes gathered)")
    print(
        f"  pairwise phase         : {pairwise:7.2f} s ({timings['pairs_reported']}/{pairs} pairs reported, "
        f"{timings['pairs_connected']} connected)"
    )
    print(
        f"  checks                 : {seconds['checks']:7.2f} s ({len(checks)} checks: "
        + ", ".join(f"{n} {c['status']}" for n, c in checks.items())
        + ")"
    )
    print(f"  total (three phases)   : {total:7.2f} s")
    print(f"doctor gather / probe    : {gather / probe_s:.2f}x")
    print(f"doctor total / (1.5 x probe + pairwise): {total / (1.5 * probe_s + pairwise):.2f} (goal <= 1.00)")
    print(f"load average at end: {load_end}")

    problems = []
    if probe_ok != args.nodes:
        problems.append(f"probe got facts from {probe_ok}/{args.nodes} hosts")
    if missing := [c for c in CHECKS if c not in checks]:
        problems.append(f"doctor did not run: {', '.join(missing)}")
    if timings["nodes_gathered"] != args.nodes:
        problems.append(f"doctor gathered {timings['nodes_gathered']}/{args.nodes} nodes")
    if not (timings["pairs_expected"] == timings["pairs_reported"] == timings["pairs_connected"] == pairs):
        detail = checks.get("pairwise ssh", {}).get("detail", "")
        problems.append(f"pairwise: {timings['pairs_connected']} of {pairs} pairs connected; {detail[:120]} ... {detail[-400:]}")
    if failed := [n for n, c in checks.items() if c["status"] == "fail"]:
        problems.append("failed checks: " + ", ".join(failed))
    thresh = Path("/proc/sys/net/ipv4/neigh/default/gc_thresh3")
    if thresh.exists() and int(thresh.read_text()) < pairs:
        print(
            f"note: {pairs} node pairs > this kernel's ARP table limit gc_thresh3={thresh.read_text().strip()} "
            "(shared by every container): pairs may time out here for that reason alone"
        )
    for problem in problems:
        print(f"NOT ALL WORK DONE: {problem}")
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
