"""The roles' test cluster (tests/cluster/roles-compose.yml on the provision-roles:test image).

Test infrastructure only; nothing here stands in for provision's code.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from cluster_support import TESTS_DIR, Cluster, wait_for_ssh, write_ed25519

ROLES_COMPOSE = TESTS_DIR / "cluster" / "roles-compose.yml"
ENSURE_ROLES_IMAGE = TESTS_DIR / "cluster" / "ensure-roles-image.sh"
ROLES_NODES = ("r1", "r2", "r3")


def compose(project: str, material: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run docker-compose for the roles cluster."""
    env = {**os.environ, "SETUP_DIR": str(material)}
    return subprocess.run(
        ["docker-compose", "-f", str(ROLES_COMPOSE), "-p", project, *args], env=env, capture_output=True, text=True, check=check
    )


def start_roles_cluster(project: str, material: Path) -> Cluster:
    """Image built (once, cached by a content label), keys made, containers up, sshd answering."""
    subprocess.run(["bash", str(ENSURE_ROLES_IMAGE)], check=True)
    material.mkdir(parents=True, exist_ok=True)
    client = write_ed25519(material / "id_ed25519", "provision-roles-tests")
    (material / "authorized_keys").write_text(client + "\n")
    host_keys = {node: write_ed25519(material / node / "ssh_host_ed25519_key", f"root@{node}") for node in ROLES_NODES}
    compose(project, material, "up", "-d", *ROLES_NODES)
    ports = {node: int(compose(project, material, "port", node, "22").stdout.strip().rsplit(":", 1)[1]) for node in ROLES_NODES}
    wait_for_ssh(ports)
    cluster = Cluster(ports, host_keys, project, key=material / "id_ed25519")
    cluster.material = material
    return cluster


def stop_roles_cluster(project: str, material: Path) -> None:
    """Remove the containers and the data volume (always called)."""
    compose(project, material, "down", "-v", "-t", "1", check=False)
