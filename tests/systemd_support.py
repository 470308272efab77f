"""Nodes that run systemd as PID 1 (tests/cluster/systemd/compose.yml on provision-systemd:test).

Test infrastructure only; nothing here stands in for provision's code. The image is the sshd node
image plus Debian 12's systemd, with empty apt lists (a fresh node) and sshd as ssh.service; the
compose file starts it the one way that works without --privileged (SYS_ADMIN, seccomp
unconfined, the host's /sys/fs/cgroup read-only, tmpfs /run, /run/lock, /tmp).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cluster_support import TESTS_DIR, Cluster, compose_cluster

SYSTEMD_COMPOSE = TESTS_DIR / "cluster" / "systemd" / "compose.yml"
ENSURE_SYSTEMD_IMAGE = TESTS_DIR / "cluster" / "ensure-systemd-image.sh"
SYSTEMD_NODES = ("ctl", "sn1", "sn2", "sn3")  # ctl: a controller to be; sn1-sn3: the stand-in's two GPUs


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
    """ctl and sn1-sn3 under systemd, booted, sshd answering; removed at the end, even after a failure."""
    ensure_systemd_image()
    with compose_cluster(SYSTEMD_COMPOSE, "SYSTEMD_DIR", project, material, nodes) as cluster:
        wait_for_boot(cluster, nodes)
        yield cluster
