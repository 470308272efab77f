"""The real Slurm cluster (slurmctld, munge, slurmd on sn1-sn3) runs on what provision wrote.

tests/slurm_support.py starts it: the nodes are probed over SSH, `provision slurm-gres` writes
gres.conf and the NodeName lines, and the daemons start on them. Each node must register
``idle`` (not drained for a CPU, memory or "gres/gpu count reported lower" mismatch) with the
GPUs provision described.
"""

from __future__ import annotations

import pytest

from slurm_support import NODES

pytestmark = pytest.mark.cluster


def test_nodes_register_idle_with_the_generated_lines(slurm_cluster):
    states = slurm_cluster.node_states()
    log = slurm_cluster.exec("ctl", "tail", "-n", "30", "/var/log/slurm/slurmctld.log", user="root", check=False).stdout
    assert states == dict.fromkeys(NODES, "idle"), log
    gres_conf = (slurm_cluster.folder / "gres.conf").read_text()
    assert "NodeName=sn[1-3] Name=gpu Type=tesla_v100-sxm2-16gb File=/dev/nvidia0 Cores=" in gres_conf
    nodes_conf = (slurm_cluster.folder / "nodes.conf").read_text().splitlines()
    assert nodes_conf[0] == "GresTypes=gpu" and nodes_conf[1].startswith("NodeName=sn[1-3] CPUs=")
    for node in NODES:
        shown = slurm_cluster.exec("ctl", "scontrol", "show", "node", node).stdout
        assert "Gres=gpu:tesla_v100-sxm2-16gb:2" in shown and "Reason=" not in shown, shown


def test_a_job_gets_a_gpu_of_the_generated_gres(slurm_cluster):
    done = slurm_cluster.exec(
        "ctl", "srun", f"--nodes={len(NODES)}", "--ntasks-per-node=1", "--gres=gpu:tesla_v100-sxm2-16gb:1", "sh", "-c",
        'echo "$(hostname) $CUDA_VISIBLE_DEVICES"',
    )  # fmt: skip
    assert sorted(done.stdout.split("\n")[:-1]) == [f"{node} 0" for node in NODES], done.stderr
