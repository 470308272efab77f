"""Support for the sshd test cluster: keys, known_hosts, inventory, docker helpers.

Everything here is test infrastructure; nothing is a stand-in for provision's own code.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

TESTS_DIR = Path(__file__).resolve().parent
CLUSTER_DIR = TESTS_DIR / ".cluster"
COMPOSE_FILE = TESTS_DIR / "cluster" / "docker-compose.yml"
ENSURE_DOCKER = TESTS_DIR / "cluster" / "ensure-docker.sh"
NODES = ("node1", "node2", "node3", "down1", "minsky")  # Debian bookworm: OpenMPI 4.1
NODES5 = ("m51", "m52", "m53")  # Debian trixie: OpenMPI 5.0
ALL_NODES = NODES + NODES5


def write_ed25519(path: Path, comment: str) -> str:
    """Write an OpenSSH ed25519 private key at ``path`` (+ ``.pub``); return the public line."""
    key = ed25519.Ed25519PrivateKey.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
    )
    path.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    Path(f"{path}.pub").write_text(f"{public} {comment}\n")
    return public


def prepare_tcsh() -> None:
    """Debian's real tcsh, unpacked into CLUSTER_DIR/tcsh for the oddnode's login shell (cached)."""
    target = CLUSTER_DIR / "tcsh"
    if (target / "bin" / "tcsh").is_file():
        return
    if (target / "bin" / "tcsh").is_dir():  # docker made the mount point when the file was missing
        shutil.rmtree(target / "bin" / "tcsh")
    work = CLUSTER_DIR / "tcsh-deb"
    work.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["apt-get", "download", "tcsh"], cwd=work, capture_output=True, text=True)
    debs = sorted(work.glob("tcsh_*.deb"))
    if not debs:  # the oddnode tests then fail naming this; the other nodes do not care
        print(f"cannot download tcsh: {done.stderr.strip()[-300:]}")
        return
    unpacked = subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(target)], capture_output=True, text=True)
    if unpacked.returncode:
        print(f"cannot unpack {debs[-1]}: {unpacked.stderr.strip()[-300:]}")


def prepare_material() -> dict[str, str]:
    """Client key, per-node host keys, the cluster's known_hosts; returns {node: public host key}."""
    CLUSTER_DIR.mkdir(exist_ok=True)
    prepare_tcsh()
    client_public = write_ed25519(CLUSTER_DIR / "id_ed25519", "provision-tests")
    (CLUSTER_DIR / "authorized_keys").write_text(client_public + "\n")
    host_keys = {}
    for node in ALL_NODES:
        host_keys[node] = write_ed25519(CLUSTER_DIR / node / "ssh_host_ed25519_key", f"root@{node}")
    (CLUSTER_DIR / "ssh_known_hosts").write_text("".join(f"{node} {key}\n" for node, key in host_keys.items()))
    return host_keys


def ssh_banner(port: int) -> bool:
    """True when an SSH server answers on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.settimeout(1)
            return conn.recv(8).startswith(b"SSH-")
    except OSError:
        return False


@dataclass
class Cluster:
    """The running test cluster as the tests see it."""

    ports: dict[str, int]
    host_keys: dict[str, str]
    project: str
    key: Path = CLUSTER_DIR / "id_ed25519"
    stopped: set[str] = field(default_factory=set)

    def known_hosts_line(self, node: str, public: str | None = None) -> str:
        """``[127.0.0.1]:PORT keytype base64`` as ssh writes it for a non-22 port."""
        return f"[127.0.0.1]:{self.ports[node]} {public or self.host_keys[node]}\n"

    def inventory_yaml(self, nodes=NODES, key: Path | None = None) -> str:
        """An inventory reaching ``nodes`` on their published ports, as user mpi."""
        lines = ["defaults:", "  user: mpi", f"  key: {key or self.key}", "hosts:"]
        for node in nodes:
            lines.append(f"  {node}: {{address: 127.0.0.1, port: {self.ports[node]}}}")
        return "\n".join(lines) + "\n"

    def container(self, node: str) -> str:
        """The docker container name of ``node``."""
        return f"{self.project}_{node}_1"

    def docker_exec(self, node: str, *command: str, user: str = "root") -> str:
        """Run a command in a node's container (test set-up only), return stdout."""
        done = subprocess.run(["docker", "exec", "-u", user, self.container(node), *command], capture_output=True, text=True)
        if done.returncode:  # the node's own words, so a failure says why
            raise AssertionError(f"{node}: {' '.join(command)} exited {done.returncode}: {done.stderr.strip()[-600:]}")
        return done.stdout

    def accepted_logins(self, node: str) -> int:
        """How many SSH logins the node's sshd has accepted so far (from its log)."""
        logs = subprocess.run(["docker", "logs", self.container(node)], capture_output=True, text=True).stderr
        return logs.count("Accepted publickey")


def ensure_docker() -> None:
    """Install/start Docker and build the node image (see ensure-docker.sh)."""
    subprocess.run(["bash", str(ENSURE_DOCKER)], check=True)


def wait_for_ssh(ports: dict[str, int], timeout: float = 60.0) -> None:
    """Block until every port answers with an SSH banner."""
    deadline = time.monotonic() + timeout
    pending = dict(ports)
    while pending and time.monotonic() < deadline:
        pending = {n: p for n, p in pending.items() if not ssh_banner(p)}
        if pending:
            time.sleep(0.2)
    if pending:
        raise RuntimeError(f"sshd did not come up on {sorted(pending)}")


@contextmanager
def compose_cluster(
    compose_file: Path,
    material_variable: str,
    project: str,
    material: Path,
    nodes: tuple[str, ...],
    services: tuple[str, ...] = (),
) -> Iterator[Cluster]:
    """A private cluster: every service of ``compose_file`` (or only ``services``) up as compose
    project ``project``, sshd answering on ``nodes``. The keys are made in ``material`` first (the client's key and its
    authorized_keys, one host key per node, their ssh_known_hosts), which the compose file mounts
    from ``$material_variable``; with the cluster, a strict known_hosts for the controller is
    ``material/known_hosts``. The containers are removed at the end, even after a failure."""
    client = write_ed25519(material / "id_ed25519", f"provision-{project}")
    (material / "authorized_keys").write_text(client + "\n")
    host_keys = {node: write_ed25519(material / node / "ssh_host_ed25519_key", f"root@{node}") for node in nodes}
    (material / "ssh_known_hosts").write_text("".join(f"{n} {k}\n" for n, k in host_keys.items()))
    env = {**os.environ, material_variable: str(material)}

    def compose(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = ["docker-compose", "-f", str(compose_file), "-p", project, *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, check=check)

    try:
        compose("up", "-d", *services)
        ports = {n: int(compose("port", n, "22").stdout.strip().rsplit(":", 1)[1]) for n in nodes}
        wait_for_ssh(ports)
        cluster = Cluster(ports, host_keys, project, key=material / "id_ed25519")
        (material / "known_hosts").write_text("".join(cluster.known_hosts_line(n) for n in nodes))
        yield cluster
    finally:
        compose("down", "-v", "-t", "1", check=False)


def fingerprint_of(public_line: str) -> str:
    """SHA256 fingerprint of an OpenSSH public key line."""
    from provision.transport.hostkeys import fingerprint

    kind, data = public_line.split()[:2]
    return fingerprint(paramiko.PKey.from_type_string(kind, __import__("base64").b64decode(data)))


os.environ.setdefault("CLUSTER_DIR", str(CLUSTER_DIR))
