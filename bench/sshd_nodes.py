"""Plain sshd containers for the benchmarks: the test cluster's node image, no registry pull.

Each node publishes sshd on a random 127.0.0.1 port and accepts one bench key as user ``mpi``.
Host keys are made here before the containers start (mounted at /cluster/host, as the test
cluster does), so the controller's known_hosts holds them without scanning. With
``peer_ssh=True`` the nodes can also SSH to each other as ``mpi``, as a healthy cluster: each
gets the bench key as mpi's own key and an /etc/ssh/ssh_known_hosts of every node's key under
its container name (the name Docker's DNS resolves on a shared network).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from cluster_support import wait_for_ssh, write_ed25519  # noqa: E402

IMAGE = os.environ.get("PROVISION_NODE_IMAGE", "provision-node:test")


def start_nodes(
    prefix: str, count: int, work: Path, docker_args: tuple[str, ...] = (), peer_ssh: bool = False
) -> tuple[list[str], dict[str, int], Path, Path]:
    """``count`` containers named ``<prefix>NNN`` (``docker_args`` added to each ``docker run``, e.g.
    a ``--network``); returns their names, {name: port}, the client key and a known_hosts holding
    every node's host key as ``[127.0.0.1]:PORT``. ``peer_ssh``: node-to-node SSH as mpi works
    (mpi's key pair, every node's host key in each node's ssh_known_hosts)."""
    key = work / "id_ed25519"
    (work / "authorized_keys").write_text(write_ed25519(key, "bench") + "\n")
    names = node_names(prefix, count)
    host_keys = {name: write_ed25519(work / "hostkeys" / name / "ssh_host_ed25519_key", f"root@{name}") for name in names}
    mounts = ["-v", f"{work}/authorized_keys:/cluster/authorized_keys:ro"]
    if peer_ssh:
        (work / "ssh_known_hosts").write_text("".join(f"{n} {k}\n" for n, k in host_keys.items()))
        mounts += ["-v", f"{work}/ssh_known_hosts:/cluster/ssh_known_hosts:ro", "-v", f"{key}:/cluster/mpi_key:ro"]
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
                f"{work}/hostkeys/{name}:/cluster/host:ro",
                *mounts,
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
    known = work / "known_hosts"
    known.write_text("".join(f"[127.0.0.1]:{ports[n]} {host_keys[n]}\n" for n in names))
    return names, ports, key, known


# The two cluster users of the setup benches (bench/setup_vs_ansible.py makes the same two).
SETUP_USERS = [{"name": "pu1", "uid": 3001}, {"name": "pu2", "uid": 3002}]


def setup_inventory(work: Path, ports: dict[str, int], key: Path) -> Path:
    """``work/hosts.yml``: the nodes of :func:`start_nodes` (user mpi, ``key``) with
    :data:`SETUP_USERS` as their cluster users."""
    import yaml

    hosts = {name: {"address": "127.0.0.1", "port": port} for name, port in ports.items()}
    document = {"defaults": {"user": "mpi", "key": str(key)}, "hosts": hosts, "vars": {"cluster_users": SETUP_USERS}}
    inventory = work / "hosts.yml"
    inventory.write_text(yaml.safe_dump(document))
    return inventory


def node_names(prefix: str, count: int) -> list[str]:
    """The container names :func:`start_nodes` uses."""
    return [f"{prefix}{index:03d}" for index in range(count)]


def stop_nodes(prefix: str, count: int) -> None:
    """Remove the containers, also half-started ones."""
    subprocess.run(["docker", "rm", "-f", *node_names(prefix, count)], capture_output=True)
