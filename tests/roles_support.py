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


FRESH_COMPOSE = TESTS_DIR / "cluster" / "fresh-compose.yml"
ENSURE_FRESH_IMAGE = TESTS_DIR / "cluster" / "ensure-fresh-image.sh"
FRESH_NODES = ("s1", "f1")  # s1: an NFS server on the roles image; f1: a fresh node (issue 15)


def compose(
    project: str, material: Path, *args: str, check: bool = True, file: Path = ROLES_COMPOSE
) -> subprocess.CompletedProcess:
    """Run docker-compose for the roles cluster (or the one in ``file``)."""
    env = {**os.environ, "SETUP_DIR": str(material)}
    return subprocess.run(
        ["docker-compose", "-f", str(file), "-p", project, *args], env=env, capture_output=True, text=True, check=check
    )


def start_roles_cluster(
    project: str, material: Path, nodes=ROLES_NODES, file: Path = ROLES_COMPOSE, images=(ENSURE_ROLES_IMAGE,)
) -> Cluster:
    """Images built (once, cached by a content label), keys made, containers up, sshd answering."""
    for script in images:
        subprocess.run(["bash", str(script)], check=True)
    material.mkdir(parents=True, exist_ok=True)
    client = write_ed25519(material / "id_ed25519", "provision-roles-tests")
    (material / "authorized_keys").write_text(client + "\n")
    host_keys = {node: write_ed25519(material / node / "ssh_host_ed25519_key", f"root@{node}") for node in nodes}
    compose(project, material, "up", "-d", *nodes, file=file)
    ports = {
        node: int(compose(project, material, "port", node, "22", file=file).stdout.strip().rsplit(":", 1)[1]) for node in nodes
    }
    wait_for_ssh(ports)
    cluster = Cluster(ports, host_keys, project, key=material / "id_ed25519")
    cluster.material = material
    return cluster


def container_address(cluster: Cluster, node: str) -> str:
    """``node``'s address on its compose network, where the controller reaches it directly (port
    22), as it reaches a real cluster's nodes; the published 127.0.0.1 port is a NAT."""
    done = subprocess.run(
        ["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", cluster.container(node)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def direct_inventory(cluster: Cluster, nodes=ROLES_NODES) -> tuple[str, str]:
    """The inventory's hosts and the known_hosts lines reaching ``nodes`` at their container
    addresses, port 22, as user mpi."""
    addresses = {node: container_address(cluster, node) for node in nodes}
    lines = ["defaults:", "  user: mpi", f"  key: {cluster.key}", "hosts:"]
    lines += [f"  {node}: {{address: {address}, port: 22}}" for node, address in addresses.items()]
    known = "".join(f"{address} {cluster.host_keys[node]}\n" for node, address in addresses.items())
    return "\n".join(lines) + "\n", known


def start_fresh_cluster(project: str, material: Path) -> Cluster:
    """s1 (roles image: nfs-ganesha to serve) and f1 (provision-fresh:test: empty apt lists)."""
    return start_roles_cluster(project, material, FRESH_NODES, FRESH_COMPOSE, (ENSURE_ROLES_IMAGE, ENSURE_FRESH_IMAGE))


def stop_roles_cluster(project: str, material: Path, file: Path = ROLES_COMPOSE) -> None:
    """Remove the containers and the data volume (always called)."""
    compose(project, material, "down", "-v", "-t", "1", check=False, file=file)


STANDIN = TESTS_DIR / "standins" / "anaconda" / "Anaconda-TEST-STAND-IN-Linux.sh"


def write_role_inventory(cluster: Cluster, folder: Path, nodes, users: str) -> tuple[Path, Path]:
    """An inventory beside its files (alice's Jupyter password in secrets/, the Anaconda TEST
    STAND-IN in installers/) reaching ``nodes`` at their container addresses: ``users`` (the
    ``cluster_users`` entries, YAML lines), s1 exporting /data/imagenet, Anaconda in /opt/anaconda3;
    and its known_hosts."""
    import hashlib
    import shutil

    (folder / "secrets").mkdir()
    (folder / "secrets" / "alice.jupyter").write_text("fresh-node-pass\n")
    (folder / "installers").mkdir()
    shutil.copy(STANDIN, folder / "installers" / "Anaconda3-TEST-STAND-IN.sh")
    sha = hashlib.sha256(STANDIN.read_bytes()).hexdigest()
    hosts, known = direct_inventory(cluster, nodes)
    (folder / "hosts.yml").write_text(
        hosts
        + "vars:\n  cluster_users:\n"
        + users
        + f"""  nfs_server: s1
  nfs_exports: [{{path: /data/imagenet}}]
  anaconda: [{{installer: installers/Anaconda3-TEST-STAND-IN.sh, sha256: "{sha}", prefix: /opt/anaconda3}}]
"""
    )
    (folder / "known_hosts").write_text(known)
    return folder / "hosts.yml", folder / "known_hosts"
