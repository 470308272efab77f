"""Nodes that run systemd as PID 1 (tests/cluster/systemd/compose.yml on provision-systemd:test).

Test infrastructure only; nothing here stands in for provision's code. The image is the sshd node
image plus Debian 12's systemd, with empty apt lists (a fresh node) and sshd as ssh.service; the
compose file starts it the one way that works without --privileged (SYS_ADMIN, seccomp
unconfined, the host's /sys/fs/cgroup read-only, tmpfs /run, /run/lock, /tmp).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cluster_support import TESTS_DIR, Cluster, compose_cluster

SYSTEMD_COMPOSE = TESTS_DIR / "cluster" / "systemd" / "compose.yml"
ENSURE_SYSTEMD_IMAGE = TESTS_DIR / "cluster" / "ensure-systemd-image.sh"
SYSTEMD_NODES = ("ctl", "sn1", "sn2", "sn3")  # ctl: a controller to be; sn1-sn3: the stand-in's two GPUs
SLURM_FROM_ZERO = "{controller: ctl, nodes: gpu}"  # the inventory's slurm: for these nodes


def ensure_systemd_image() -> None:
    """Build provision-systemd:test (and the images below it) when missing or stale."""
    subprocess.run(["bash", str(ENSURE_SYSTEMD_IMAGE)], check=True)


def wait_for_boot(cluster: Cluster, nodes=SYSTEMD_NODES, timeout: float = 120) -> dict[str, str]:
    """Block until systemd on each node has finished starting up; {node: is-system-running's word}.

    sshd answering only means ssh.service started; ``--wait`` returns once the boot is over
    ("running", or "degraded" when a unit failed)."""
    states = {}
    for node in nodes:
        done = subprocess.run(
            ["docker", "exec", cluster.container(node), "systemctl", "is-system-running", "--wait"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        states[node] = done.stdout.strip()
    return states


@contextmanager
def systemd_cluster(project: str, material: Path, nodes=SYSTEMD_NODES) -> Iterator[Cluster]:
    """``nodes`` (ctl and sn1-sn3 unless told) under systemd, booted, sshd answering; only they are
    started; removed at the end, even after a failure."""
    ensure_systemd_image()
    with compose_cluster(SYSTEMD_COMPOSE, "SYSTEMD_DIR", project, material, nodes, services=nodes) as cluster:
        wait_for_boot(cluster, nodes)
        yield cluster


def slurm_inventory(cluster: Cluster, material: Path, slurm: str = SLURM_FROM_ZERO, nodes=SYSTEMD_NODES) -> Path:
    """``material/hosts.yml``: ``nodes`` (ctl and sn1-sn3 unless told) on their published ports as
    user mpi, group ``gpu`` (every one but ctl), and ``vars: slurm:`` set to ``slurm`` (Slurm from
    zero by default)."""
    inventory = material / "hosts.yml"
    gpu = ", ".join(node for node in nodes if node != "ctl")
    inventory.write_text(cluster.inventory_yaml(nodes) + f"groups:\n  gpu: [{gpu}]\nvars:\n  slurm: {slurm}\n")
    return inventory


def start_slurm_from_zero(
    cluster: Cluster, material: Path, run_cli, slurm: str = SLURM_FROM_ZERO, nodes=SYSTEMD_NODES
) -> tuple[Path, float]:
    """Slurm installed and running on the fresh nodes the way a user does it: probe the compute
    nodes, then ``setup-cluster`` (tests/test_slurm_from_zero_cluster.py checks each step).
    Returns the inventory and setup-cluster's seconds once ``sinfo`` shows every compute node
    idle; raises naming what failed."""
    inventory = slurm_inventory(cluster, material, slurm, nodes)
    common = ["-i", str(inventory), "--known-hosts", str(material / "known_hosts")]
    took = 0.0
    for step in (["probe", "gpu", *common], ["setup-cluster", *common]):
        started = time.monotonic()
        done = run_cli(*step)
        took = time.monotonic() - started
        if done.returncode:
            raise RuntimeError(f"{step[0]} failed: {done.stdout[-3000:]}{done.stderr[-3000:]}")
    computes = [node for node in nodes if node != "ctl"]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        states = cluster.docker_exec("ctl", "sh", "-c", "sinfo -N -h -o '%N %T' 2>/dev/null; true").split()
        if states[1::2] == ["idle"] * len(computes):
            return inventory, took
        time.sleep(1)
    raise RuntimeError(f"sinfo: not every node idle: {states}")


def finished_job(show) -> str:
    """``show()`` (``scontrol show job N``'s record) once the job has left COMPLETING, at most 30 s:
    ``sbatch --wait`` returns at the job's end, while its nodes may still be completing it
    (epilog, cleanup), which scontrol shows as JobState=COMPLETING."""
    record = show()
    for _ in range(60):
        if "JobState=COMPLETING" not in record:
            break
        time.sleep(0.5)
        record = show()
    return record
