"""Support for the Slurm tests: the Slurm image (Debian's slurmctld, slurmd, slurm-client, munge).

Test infrastructure only. The image is tests/cluster/slurm/Dockerfile on top of the test node
image (provision-node:test, built by ensure-docker.sh); Docker's layer cache makes a rebuild a
no-op until the node image or the Dockerfile changes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cluster_support import CLUSTER_DIR, TESTS_DIR, ensure_docker, wait_for_ssh, write_ed25519

SLURM_DIR = TESTS_DIR / "cluster" / "slurm"
SLURM_IMAGE = "provision-slurm:test"
# The least slurm.conf that lets scontrol and slurmd -C/-G read their configuration offline.
OFFLINE_CONF = "ClusterName=offline\nSlurmctldHost=localhost\n"


def ensure_slurm_image() -> str:
    """Build (or find in the layer cache) the Slurm image; return its tag."""
    ensure_docker()
    subprocess.run(["docker", "build", "-q", "-t", SLURM_IMAGE, str(SLURM_DIR)], check=True, capture_output=True, text=True)
    return SLURM_IMAGE


def run_in_slurm_image(
    script: str, folder: Path, *, hostname: str = "node7", timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run ``sh -ec script`` in a throw-away Slurm container with ``folder`` at /work (test set-up)."""
    return subprocess.run(
        ["docker", "run", "--rm", "--hostname", hostname, "-v", f"{folder}:/work", SLURM_IMAGE, "sh", "-ec", script],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# The test Slurm cluster --------------------------------------------------------------------------

COMPOSE = SLURM_DIR / "compose.yml"
NODES = ("sn1", "sn2", "sn3")
PARTITION = "gpu"
# What the cluster needs besides the NodeName lines provision writes: no privileges, so processes
# are tracked by their parent ids (proctrack/linuxproc) and not bound by Slurm (task/none: in an
# unprivileged container task/affinity fails every launch with "task_g_set_affinity: Operation
# not permitted"), with no cgroup anywhere.
SLURM_CONF_HEAD = """ClusterName=provtest
SlurmctldHost=ctl
AuthType=auth/munge
SlurmUser=slurm
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
"""


@dataclass
class SlurmCluster:
    """The running test Slurm cluster as the tests see it."""

    project: str
    folder: Path  # mounted at /cluster/slurm in every container
    ports: dict[str, int]  # sshd of ctl and each node on 127.0.0.1
    inventory: Path  # reaches ctl and the nodes over SSH as user mpi
    known_hosts: Path
    facts_dir: Path  # the nodes' facts from the SSH probe
    compose: Path = COMPOSE
    nodes: tuple[str, ...] = NODES

    def container(self, name: str) -> str:
        """The docker container of ``name``."""
        return f"{self.project}_{name}_1"

    def exec(self, name: str, *command: str, user: str = "mpi", check: bool = True) -> subprocess.CompletedProcess:
        """Run a command in a container (test set-up and checks only)."""
        return subprocess.run(
            ["docker", "exec", "-u", user, self.container(name), *command],
            capture_output=True,
            text=True,
            check=check,
            timeout=300,
        )

    def copy_in(self, name: str, source: Path, target: str) -> None:
        """Copy a test file into a container (docker cp; test set-up only)."""
        subprocess.run(["docker", "cp", str(source), f"{self.container(name)}:{target}"], check=True, capture_output=True)

    def node_states(self) -> dict[str, str]:
        """{node: state} as slurmctld reports them (``sinfo -N``)."""
        done = self.exec("ctl", "sinfo", "-N", "-h", "-o", "%N %T", check=False)
        return dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())


def _compose(project: str, env: dict[str, str], *args: str, compose: Path = COMPOSE) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker-compose", "-p", project, "-f", str(compose), *args], env=env, capture_output=True, text=True, timeout=300
    )


def _port(project: str, env: dict[str, str], service: str, compose: Path = COMPOSE) -> int:
    done = _compose(project, env, "port", service, "22", compose=compose)
    return int(done.stdout.strip().rsplit(":", 1)[1])


def start_slurm_cluster(
    run_cli,
    *,
    compose: Path = COMPOSE,
    nodes: tuple[str, ...] = NODES,
    project: str = "",
    image=ensure_slurm_image,
    conf_tail: str = "",
) -> SlurmCluster:
    """Start ctl + the nodes of ``compose`` (sn1-sn3 of compose.yml), probe the nodes over SSH, write
    slurm.conf/gres.conf with provision, start Slurm; ``image`` builds the image the compose file
    names, ``conf_tail`` ends slurm.conf (the cluster's folder, CLUSTER_DIR/project, may be
    filled before: it is /cluster/slurm on every host).

    Returns once every node is idle, or after 90 s (the tests then show the states and the log).
    """
    image()
    project = project or f"provslurm{os.getpid()}"
    folder = CLUSTER_DIR / project
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "munge.key").write_bytes(os.urandom(1024))
    public = write_ed25519(folder / "id_ed25519", "provision-slurm-tests")
    (folder / "authorized_keys").write_text(public + "\n")
    env = {**os.environ, "SLURM_CLUSTER_DIR": str(folder)}
    up = _compose(project, env, "up", "-d", compose=compose)
    if up.returncode:
        raise RuntimeError(f"docker-compose up failed: {up.stderr[-2000:]}")
    ports = {name: _port(project, env, name, compose) for name in ("ctl", *nodes)}
    wait_for_ssh(ports)
    inventory = folder / "hosts.yml"
    inventory.write_text(
        f"defaults:\n  user: mpi\n  key: {folder / 'id_ed25519'}\nhosts:\n"
        + "".join(f"  {name}: {{address: 127.0.0.1, port: {port}}}\n" for name, port in ports.items())
        + f"groups:\n  slurm: [{', '.join(nodes)}]\n"
    )
    known_hosts = folder / "known_hosts"
    facts_dir = folder / "facts"
    common = ["-i", str(inventory), "--known-hosts", str(known_hosts)]
    probe = run_cli("probe", *nodes, *common, "--accept-new-host-keys", "--facts-dir", str(facts_dir))
    if probe.returncode:
        raise RuntimeError(f"probe failed: {probe.stdout}{probe.stderr}")
    gres = run_cli(
        "slurm-gres", "slurm", "-i", str(inventory), "--facts-dir", str(facts_dir), "-o", str(folder / "gres.conf"),
        "--slurm-conf", str(folder / "nodes.conf"),
    )  # fmt: skip
    if gres.returncode:
        raise RuntimeError(f"slurm-gres failed: {gres.stderr}")
    (folder / "slurm.conf").write_text(
        SLURM_CONF_HEAD
        + (folder / "nodes.conf").read_text()
        + f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
        + conf_tail
    )
    cluster = SlurmCluster(project, folder, ports, inventory, known_hosts, facts_dir, compose, nodes)
    cluster.exec("ctl", "sh", "/usr/local/sbin/start-slurm.sh", "ctl", user="root")
    for name in nodes:
        cluster.exec(name, "sh", "/usr/local/sbin/start-slurm.sh", "node", user="root")
    deadline = time.monotonic() + 90
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = cluster.node_states()
        if len(states) == len(nodes) and all(state == "idle" for state in states.values()):
            break
        time.sleep(1)
    return cluster


def stop_slurm_cluster(cluster: SlurmCluster) -> None:
    """Remove the cluster's containers, network and folder."""
    env = {**os.environ, "SLURM_CLUSTER_DIR": str(cluster.folder)}
    _compose(cluster.project, env, "down", "-v", "-t", "1", compose=cluster.compose)
    shutil.rmtree(cluster.folder, ignore_errors=True)
