"""Support for the Slurm tests: the Slurm image (Debian's slurmctld, slurmd, slurm-client, munge).

Test infrastructure only. The image is tests/cluster/slurm/Dockerfile on top of the test node
image (provision-node:test, built by ensure-docker.sh); Docker's layer cache makes a rebuild a
no-op until the node image or the Dockerfile changes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from cluster_support import TESTS_DIR, ensure_docker

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
