"""A private sshd cluster for the setup-cluster tests (its own compose project and keys).

Test infrastructure only; nothing here stands in for provision's code.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from cluster_support import TESTS_DIR, Cluster, ensure_docker, wait_for_ssh, write_ed25519

SETUP_COMPOSE = TESTS_DIR / "cluster" / "setup-compose.yml"
SETUP_NODES = ("s1", "s2", "s3")


SHARED_HOME_COMPOSE = TESTS_DIR / "cluster" / "shared-home-compose.yml"
COMPOSE_FILES: dict[str, Path] = {}  # project -> its compose file (the setup cluster's unless told)


def compose(project: str, material: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run docker-compose for the setup cluster (or the compose file ``project`` was started with)."""
    env = {**os.environ, "SETUP_DIR": str(material)}
    file = COMPOSE_FILES.get(project, SETUP_COMPOSE)
    return subprocess.run(
        ["docker-compose", "-f", str(file), "-p", project, *args], env=env, capture_output=True, text=True, check=check
    )


def start_setup_cluster(project: str, material: Path, nodes=SETUP_NODES, compose_file: Path = SETUP_COMPOSE) -> Cluster:
    """Keys, containers up, sshd answering; returns the cluster as the tests see it."""
    COMPOSE_FILES[project] = compose_file
    ensure_docker()
    material.mkdir(parents=True, exist_ok=True)
    client = write_ed25519(material / "id_ed25519", "provision-setup-tests")
    (material / "authorized_keys").write_text(client + "\n")
    host_keys = {node: write_ed25519(material / node / "ssh_host_ed25519_key", f"root@{node}") for node in nodes}
    compose(project, material, "up", "-d", *nodes)
    ports = {}
    for node in nodes:
        out = compose(project, material, "port", node, "22").stdout.strip()
        ports[node] = int(out.rsplit(":", 1)[1])
    wait_for_ssh(ports)
    cluster = Cluster(ports, host_keys, project, key=material / "id_ed25519")
    cluster.material = material
    return cluster


def restart_node(cluster: Cluster, node: str) -> None:
    """Start a stopped node again; its published port changes, so ``cluster.ports`` is updated."""
    subprocess.run(["docker", "start", cluster.container(node)], check=True, capture_output=True)
    out = compose(cluster.project, cluster.material, "port", node, "22").stdout.strip()
    cluster.ports[node] = int(out.rsplit(":", 1)[1])
    wait_for_ssh({node: cluster.ports[node]})


def stop_setup_cluster(project: str, material: Path) -> None:
    """Remove the containers (always called, even after a failure)."""
    compose(project, material, "down", "-v", "-t", "1", check=False)


def write_files(cluster: Cluster, folder: Path, users_yaml: str, nodes=SETUP_NODES) -> tuple[Path, Path]:
    """An inventory (with cluster_users) and a strict known_hosts for the nodes."""
    inventory = folder / "hosts.yml"
    inventory.write_text(cluster.inventory_yaml(nodes) + users_yaml)
    known = folder / "known_hosts"
    known.write_text("".join(cluster.known_hosts_line(n) for n in nodes))
    return inventory, known


def add_sudo_user(cluster: Cluster, node: str, password: str) -> None:
    """User ``pw`` on ``node``: sudo with a password, logging in with the tests' key."""
    cluster.docker_exec(
        node,
        "sh",
        "-c",
        (
            "id pw >/dev/null 2>&1 || useradd -m -s /bin/bash pw; "
            f"echo 'pw:{password}' | chpasswd; echo 'pw ALL=(ALL) ALL' > /etc/sudoers.d/pw; chmod 440 /etc/sudoers.d/pw; "
            "install -d -m 700 -o pw -g pw /home/pw/.ssh; install -m 600 -o pw -g pw /cluster/authorized_keys /home/pw/.ssh/"
        ),
    )
