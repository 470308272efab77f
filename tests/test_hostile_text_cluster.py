"""Integration, on real sshd nodes: a node's text never drives the admin's terminal (issue 24
finding 7), and the capture script never writes through a user's links (finding 1).

A TEST STAND-IN nvidia-smi (tests/cluster/standins/hostile/nvidia-smi) is copied into node2 for
the first tests and removed after them; user mpi is the unprivileged cluster user of finding 1.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.cluster

STAND_IN = Path(__file__).parent / "cluster" / "standins" / "hostile" / "nvidia-smi"


@pytest.fixture
def hostile_gpu(cluster):
    """node2 with the stand-in nvidia-smi as root's /usr/local/bin/nvidia-smi (removed after)."""
    subprocess.run(["docker", "cp", str(STAND_IN), f"{cluster.container('node2')}:/usr/local/bin/nvidia-smi"], check=True)
    cluster.docker_exec("node2", "chmod", "755", "/usr/local/bin/nvidia-smi")
    try:
        yield cluster
    finally:
        cluster.docker_exec("node2", "rm", "-f", "/usr/local/bin/nvidia-smi", "/tmp/nvidia-smi-fails")


def probe(cluster_files, facts_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    inventory, known_hosts = cluster_files
    return run_cli(
        "probe", "-i", str(inventory), "--known-hosts", str(known_hosts), "--facts-dir", str(facts_dir),
        "--connect-timeout", "5", "--ssh-config", "/dev/null", *extra,
    )  # fmt: skip


def test_a_gpu_name_with_escape_sequences_reaches_the_table_escaped(hostile_gpu, cluster_files, tmp_path):
    done = probe(cluster_files, tmp_path / "facts", "node2", "--topology")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr
    # the GPUs cell, folded over the row's lines as rich folds it (other cells fold beside it)
    rows = [line.split("│")[1:-1] for line in done.stdout.splitlines() if line.startswith("│")]
    gpus = "".join(cells[3].strip() for cells in rows)
    assert "V100\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J" in gpus.replace(" ", "")


def test_a_failing_steps_stderr_reaches_slurm_gres_error_escaped(hostile_gpu, cluster_files, tmp_path):
    hostile_gpu.docker_exec("node2", "touch", "/tmp/nvidia-smi-fails")
    done = probe(cluster_files, tmp_path / "facts", "node2", "--json")
    assert done.returncode == 0, done.stderr
    gres = run_cli("slurm-gres", "node2", "--facts-dir", str(tmp_path / "facts"))
    assert gres.returncode == 1 and "\x1b" not in gres.stderr and "\x07" not in gres.stderr
    assert "nvidia-smi failed (exit 9: Failed to initialize NVML: Driver/library version mismatch\\x1b]52;c;" in gres.stderr


def _capture_as_root(cluster, node: str, folder: str) -> subprocess.CompletedProcess:
    """The README's `ssh node01 sh capture.sh /tmp/cap`, run by root on the node."""
    script = run_cli("capture-script").stdout
    return subprocess.run(
        ["docker", "exec", "-i", cluster.container(node), "sh", "-s", folder], input=script, text=True, capture_output=True
    )


def test_capture_script_run_by_root_never_writes_through_a_users_link(cluster):
    shadow = cluster.docker_exec("node1", "sha256sum", "/etc/shadow")
    plant = "mkdir -p /tmp/cap/node1 && ln -s /etc/shadow /tmp/cap/node1/hostname.txt"  # as alice would
    cluster.docker_exec("node1", "sh", "-c", plant, user="mpi")
    try:
        done = _capture_as_root(cluster, "node1", "/tmp/cap")
        assert done.returncode == 1
        assert done.stderr.strip() == (
            "capture: /tmp/cap/node1 already exists (or cannot be made): the script writes only into a folder "
            "it makes itself; remove it or name another DIR"
        )
        assert cluster.docker_exec("node1", "sha256sum", "/etc/shadow") == shadow
    finally:
        cluster.docker_exec("node1", "rm", "-rf", "/tmp/cap")


def test_capture_script_in_a_users_folder_makes_a_private_one_of_its_own(cluster, tmp_path):
    cluster.docker_exec("node1", "sh", "-c", "mkdir /tmp/cap2 && ln -s /etc /tmp/cap3", user="mpi")
    try:
        linked = _capture_as_root(cluster, "node1", "/tmp/cap3")  # the folder itself a link: refused
        assert linked.returncode == 1 and "capture: /tmp/cap3 is a link: refused" in linked.stderr
        assert "node1" not in cluster.docker_exec("node1", "ls", "/etc")
        done = _capture_as_root(cluster, "node1", "/tmp/cap2")
        assert done.returncode == 0, done.stderr
        assert cluster.docker_exec("node1", "stat", "-c", "%U %a", "/tmp/cap2/node1").split() == ["root", "700"]
        peek = ["docker", "exec", "-u", "mpi", cluster.container("node1"), "cat", "/tmp/cap2/node1/hostname.txt"]
        peek = subprocess.run(peek, capture_output=True)
        assert peek.returncode != 0  # the user who owns /tmp/cap2 cannot read or replace root's captures
        subprocess.run(["docker", "cp", f"{cluster.container('node1')}:/tmp/cap2", str(tmp_path / "cap")], check=True)
        replayed = run_cli("probe", "--replay", str(tmp_path / "cap"), "--json", "--no-save")
        assert replayed.returncode == 0, replayed.stderr
    finally:
        cluster.docker_exec("node1", "rm", "-rf", "/tmp/cap2", "/tmp/cap3")
