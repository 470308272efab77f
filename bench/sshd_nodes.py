"""Plain sshd containers for the benchmarks: the test cluster's node image, no registry pull.

Each node publishes sshd on a random 127.0.0.1 port and accepts one bench key as user ``mpi``;
its host key is read from the container (not scanned over the network) into a known_hosts file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from cluster_support import wait_for_ssh, write_ed25519  # noqa: E402

IMAGE = os.environ.get("PROVISION_NODE_IMAGE", "provision-node:test")


def start_nodes(
    prefix: str, count: int, work: Path, docker_args: tuple[str, ...] = ()
) -> tuple[list[str], dict[str, int], Path, Path]:
    """``count`` containers named ``<prefix>NNN`` (``docker_args`` added to each ``docker run``, e.g.
    a ``--network``); returns their names, {name: port}, the client key and a known_hosts holding
    every node's host key as ``[127.0.0.1]:PORT``."""
    key = work / "id_ed25519"
    (work / "authorized_keys").write_text(write_ed25519(key, "bench") + "\n")
    names = node_names(prefix, count)
    for name in names:
        subprocess.run(
            [
                "docker",
                "run",
                "-d",
                "--rm",
                "--init",
                "--name",
                name,
                "--hostname",
                name,
                "-p",
                "127.0.0.1::22",
                "-v",
                f"{work}/authorized_keys:/cluster/authorized_keys:ro",
                *docker_args,
                IMAGE,
            ],
            check=True,
            capture_output=True,
        )
    ports = {}
    for name in names:
        out = subprocess.run(["docker", "port", name, "22"], check=True, capture_output=True, text=True).stdout
        ports[name] = int(out.splitlines()[0].rsplit(":", 1)[1])
    wait_for_ssh(ports, timeout=180)
    lines = []
    for name, port in ports.items():
        for _ in range(100):  # the entrypoint writes the host key just before sshd starts
            found = subprocess.run(
                ["docker", "exec", name, "cat", "/etc/ssh/ssh_host_ed25519_key.pub"], capture_output=True, text=True
            )
            if found.returncode == 0:
                break
            time.sleep(0.1)
        lines.append(f"[127.0.0.1]:{port} {' '.join(found.stdout.split()[:2])}\n")
    known = work / "known_hosts"
    known.write_text("".join(lines))
    return names, ports, key, known


def node_names(prefix: str, count: int) -> list[str]:
    """The container names :func:`start_nodes` uses."""
    return [f"{prefix}{index:03d}" for index in range(count)]


def stop_nodes(prefix: str, count: int) -> None:
    """Remove the containers, also half-started ones."""
    subprocess.run(["docker", "rm", "-f", *node_names(prefix, count)], capture_output=True)
