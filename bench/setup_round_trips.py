"""Round trips per host of setup-cluster on N sshd containers (default 16): --check on fresh
nodes, the first run, the no-change run, --check on converged nodes (issue 14: a converged host
must cost one connection and one round trip).

    python bench/setup_round_trips.py [N]

The nodes are the test cluster's image (bench/sshd_nodes.py: sshd, user mpi with passwordless
sudo); the playbook is the shipped setup-cluster.yml with two cluster users (the users and SSH
roles; NFS, Anaconda and Jupyter have no variables, so they do nothing). Every run's exit status
and per-host recap are checked: a run that did not do its work fails the script.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sshd_nodes import start_nodes, stop_nodes  # noqa: E402

USERS = "  cluster_users:\n    - {name: alice, uid: 2001}\n    - {name: bob, uid: 2002}\n"


def setup(inventory: Path, known: Path, *extra: str) -> dict[str, dict]:
    """One setup-cluster run; its recap by host (the run must succeed)."""
    done = subprocess.run(
        ["provision", "setup-cluster", "-i", str(inventory), "--known-hosts", str(known), "--json", "--no-verify", *extra],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(f"setup-cluster {' '.join(extra)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return {row["host"]: row for row in json.loads(done.stdout)["recap"]}


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    prefix = f"benchrt{os.getpid()}-"
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        names, ports, key, known = start_nodes(prefix, count, work)
        try:
            lines = ["defaults:", "  user: mpi", f"  key: {key}", "hosts:"]
            lines += [f"  {name}: {{address: 127.0.0.1, port: {ports[name]}}}" for name in names]
            inventory = work / "hosts.yml"
            inventory.write_text("\n".join(lines) + "\nvars:\n" + USERS)
            print(f"{count} nodes; load average at start: {os.getloadavg()[0]:.1f}")
            for label, extra in (
                ("--check, fresh nodes", ("--check",)),
                ("first run", ()),
                ("no-change run", ()),
                ("--check, converged", ("--check",)),
            ):
                started = time.monotonic()
                recap = setup(inventory, known, *extra)
                seconds = time.monotonic() - started
                if sorted(recap) != sorted(names) or any(r["failed"] or r["unreachable"] for r in recap.values()):
                    raise SystemExit(f"{label}: not every host ran cleanly: {recap}")
                trips = sorted({r["round_trips"] for r in recap.values()})
                changed = sorted({r["changed"] for r in recap.values()})
                print(f"{label:22} {seconds:6.1f} s  changed/host {changed}  round trips/host {trips}")
            print(f"load average at end: {os.getloadavg()[0]:.1f}")
        finally:
            stop_nodes(prefix, count)


if __name__ == "__main__":
    main()
