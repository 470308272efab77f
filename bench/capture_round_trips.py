#!/usr/bin/env python3
"""Capture what a real node answers to setup-cluster's no-change round trip, for the simulated
nodes of bench/scale_4096.py (issue 37, item 4).

Starts one real sshd container (the test image provision-node:test), converges it with
`provision setup-cluster --tags users` (two cluster users, as bench/setup_vs_ansible.py makes),
then runs the same command again, the no-change run, with every round trip recorded: the remote
command, the script sent on its stdin, and what the node printed (stdout, stderr, exit status),
the run's nonce replaced by ``NONCE`` everywhere. The node's own identity as the controller saw it
(host name, addresses, host keys: its hostinfo fact) is recorded beside it, so that a simulated
node can put its own in their place. Written as JSON (default:
tests/fixtures/round-trips/setup-users-no-change.json). Needs root (Docker).

    python3 bench/capture_round_trips.py [--out FILE]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from sshd_nodes import start_nodes, stop_nodes  # noqa: E402

from cluster_support import ensure_docker  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "round-trips" / "setup-users-no-change.json"
USERS = [{"name": "pu1", "uid": 3001}, {"name": "pu2", "uid": 3002}]  # bench/setup_vs_ansible.py's
SETUP_ARGS = ["--tags", "users", "--no-verify", "--json"]

# Run in a child interpreter: provision's own CLI, with Session.run wrapped to record each round trip.
RECORDER = r"""
import json, re, sys
import provision.transport.session as session
from provision.engine.user_shells import batch_nonce
out, args = sys.argv[1], sys.argv[2:]
records, original = [], session.Session.run

def run(self, command, stdin=None, timeout=None):
    result = original(self, command, stdin, timeout)
    text = stdin.decode() if isinstance(stdin, bytes) else (stdin or "")
    nonce = re.search(r"PROVISION_FRAME='@@([0-9a-f]+)@@'", text).group(1)
    def normal(part):  # the run's nonce written NONCE, and each user batch's marker as NONCE's would be
        for number in range(text.count("PROVISION_FRAME=") - 1):
            part = part.replace(batch_nonce(nonce, number), batch_nonce("NONCE", number))
        return part.replace(nonce, "NONCE")
    records.append({
        "host": self.host.name,
        "command": command,
        "stdin": normal(text),
        "stdout": normal(result.stdout),
        "stderr": normal(result.stderr),
        "exit_code": result.exit_code,
    })
    return result

session.Session.run = run
from provision.cli import main
try:
    main(args)
finally:
    with open(out, "w") as f:
        json.dump(records, f)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    ensure_docker()
    prefix = f"capture{os.getpid()}-"
    with tempfile.TemporaryDirectory(prefix="provision-capture.") as tmp:
        work = Path(tmp)
        try:
            _names, ports, key, known = start_nodes(prefix, 1, work)
            name, port = next(iter(ports.items()))
            inventory = work / "hosts.yml"
            inventory.write_text(
                json.dumps(
                    {
                        "defaults": {"user": "mpi", "key": str(key)},
                        "hosts": {"node": {"address": "127.0.0.1", "port": port}},
                        "vars": {"cluster_users": USERS},
                    }
                )
            )
            command = ["setup-cluster", "-i", str(inventory), "--known-hosts", str(known), "--ssh-config", "/dev/null"]
            first = subprocess.run(
                [sys.executable, "-m", "provision", *command, *SETUP_ARGS], capture_output=True, text=True, check=False
            )
            if first.returncode != 0:
                sys.exit(f"the first run failed ({first.returncode}): {first.stdout[-1500:]} {first.stderr[-1500:]}")
            records = work / "records.json"
            done = subprocess.run(
                [sys.executable, "-c", RECORDER, str(records), *command, *SETUP_ARGS], capture_output=True, text=True, check=False
            )
            report = json.loads(done.stdout)
            recap = report["recap"]
            if done.returncode != 0 or any(r["changed"] or r["failed"] or r["unreachable"] for r in recap):
                sys.exit(f"the no-change run did not converge: {recap} {done.stderr[-1500:]}")
            trips = json.loads(records.read_text())
            identity = json.loads((work / ".provision-cache" / "hosts" / "node.json").read_text())["facts"]
            document = {
                "source": (
                    f"bench/capture_round_trips.py on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
                    f"a provision-node:test container ({name}), converged by `provision setup-cluster {' '.join(SETUP_ARGS)}`, "
                    "then this no-change run recorded; the nonce is NONCE"
                ),
                "setup_args": SETUP_ARGS,
                "cluster_users": USERS,
                "recap": recap,
                "node": {k: identity[k] for k in ("hostname", "fqdn", "addresses", "host_keys")},
                "round_trips": [{k: v for k, v in trip.items() if k != "host"} for trip in trips],
            }
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(document, indent=1) + "\n")
            print(f"{len(trips)} round trip(s) of {name} written to {args.out}")
        finally:
            stop_nodes(prefix, 1)


if __name__ == "__main__":
    main()
