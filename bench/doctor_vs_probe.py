"""`provision doctor` beside `provision probe` on the same sshd containers (default 64).

Both run as the installed CLI, one after the other, on the same nodes and forks; the figures
printed are wall times and their ratio, with the load average (the machine is shared). doctor
does probe's round trip plus its own steps, then the pairwise step: every node runs ssh to
every peer. The containers share a Docker network of their own, so names resolve (Docker's
DNS) and each pairwise attempt is a real SSH key exchange with the peer's sshd; it then stops
at "Host key verification failed" (BatchMode, the nodes do not know each other's keys), so it
costs about a full handshake, without the login.

    python bench/doctor_vs_probe.py [--nodes 64]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sshd_nodes import start_nodes, stop_nodes  # noqa: E402


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    return time.monotonic() - started, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--forks", type=int, default=64)
    args = parser.parse_args()
    prefix = f"benchdoctor{os.getpid()}-"
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        network = prefix.rstrip("-")
        subprocess.run(["docker", "network", "create", network], check=True, capture_output=True)
        try:
            names, ports, key, known = start_nodes(prefix, args.nodes, work, ("--network", network))
            inventory = work / "hosts.yml"
            lines = ["defaults:", "  user: mpi", f"  key: {key}", "hosts:"]
            lines += [f"  {n}: {{address: 127.0.0.1, port: {ports[n]}}}" for n in names]
            inventory.write_text("\n".join(lines) + "\n")
            common = ["-i", str(inventory), "--known-hosts", str(known), "--forks", str(args.forks)]
            load = os.getloadavg()
            probe_s, probe = timed(["provision", "probe", *common, "--no-save", "--json"])
            doctor_s, doctor = timed(["provision", "doctor", *common, "--json"])
            load_after = os.getloadavg()
        finally:
            stop_nodes(prefix, args.nodes)
            subprocess.run(["docker", "network", "rm", network], capture_output=True)
    print(f"nodes: {args.nodes}, forks: {args.forks}")
    print(f"provision probe : {probe_s:6.2f} s (exit {probe.returncode})")
    print(f"provision doctor: {doctor_s:6.2f} s (exit {doctor.returncode}; gather + pairwise step)")
    print(f"doctor / probe  : {doctor_s / probe_s:.2f}x")
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: {load_after[0]:.2f}")
    if doctor.returncode not in (0, 1):
        print(doctor.stderr[-2000:])


if __name__ == "__main__":
    main()
