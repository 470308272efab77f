"""`provision launch --format sbatch` run by the real Slurm cluster (tests/slurm_support.py).

The script is submitted on ctl with `sbatch --wait` as user mpi. Inside the allocation OpenMPI 4's
mpirun (Debian's openmpi-bin on the nodes) starts its daemons with srun (plm/slurm, shown by its
verbose line) and binds by the rank file; every rank's --report-bindings line and the CPUs it may
run on (its Cpus_allowed_list) must be the planned host and core.
"""

from __future__ import annotations

import re

import pytest

from conftest import run_cli
from provision.launch.bindings import check_bindings, parse_binding_line
from provision.plans.dims import parse_dims
from provision.plans.rankfile import plan_rankfile
from provision.probe.store import load_host
from slurm_support import NODES

pytestmark = pytest.mark.cluster

# Each rank: where it may run, and the GPU a program picking cuda:LOCAL_RANK would use (item
# LOCAL_RANK of CUDA_VISIBLE_DEVICES, LOCAL_RANK and RANK as the wrapper exports them from OpenMPI's).
PROGRAM = [
    "sh",
    "-c",
    'echo "cpus $OMPI_COMM_WORLD_RANK $(hostname) $(grep Cpus_allowed_list /proc/self/status | cut -f2)"; '
    'echo "env $RANK local=$LOCAL_RANK size=$WORLD_SIZE gpu=$(echo "$CUDA_VISIBLE_DEVICES" | cut -d, -f$((LOCAL_RANK + 1))) '
    'cuda=$CUDA_VISIBLE_DEVICES hca=${NCCL_IB_HCA-unset} ifname=$NCCL_SOCKET_IFNAME"',
]
RANK_CPUS = re.compile(r"^cpus (\d+) (\w+) (\d+)$", re.MULTILINE)
RANK_ENV = re.compile(r"^env (\d+) local=(\d+) size=(\d+) gpu=(\S*) cuda=(\S*) hca=(\S*) ifname=(\S*)$", re.MULTILINE)


def test_the_sbatch_script_binds_every_rank_as_planned(slurm_cluster, tmp_path):
    dims = "2x3x1"
    made = run_cli(
        "launch", dims, "--hosts", ",".join(NODES), "-i", str(slurm_cluster.inventory), "--facts-dir",
        str(slurm_cluster.facts_dir), "--format", "sbatch", "--report-bindings", "--", *PROGRAM,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "#SBATCH --gres=gpu:2" in made.stdout and "#SBATCH --ntasks-per-node=2" in made.stdout
    script = tmp_path / "job.sh"
    script.write_text(made.stdout)
    slurm_cluster.copy_in("ctl", script, "/tmp/provision-job.sh")
    slurm_cluster.exec("ctl", "chmod", "644", "/tmp/provision-job.sh", user="root")
    submitted = slurm_cluster.exec(
        "ctl", "sbatch", "--wait", "--chdir=/tmp", "--output=/tmp/provision-job-%j.out",
        "--export=ALL,OMPI_MCA_plm_base_verbose=5", "/tmp/provision-job.sh", check=False,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    job = re.search(r"Submitted batch job (\d+)", submitted.stdout).group(1)
    # The output file is on the batch host (the first node): the nodes share no file system.
    outputs = [slurm_cluster.exec(n, "cat", f"/tmp/provision-job-{job}.out", check=False) for n in NODES]
    output = next(o.stdout for o in outputs if o.returncode == 0)
    assert re.search(r"plm:slurm: final top-level argv:\s+srun .*orted", output), output
    plan = plan_rankfile(parse_dims(dims), [load_host(slurm_cluster.facts_dir, n) for n in NODES])
    bindings = {b.rank: b for b in map(parse_binding_line, output.splitlines()) if b is not None}
    assert len(bindings) == 6 and check_bindings(plan, bindings) == [], output
    # What the kernel says each rank may run on: the planned core's one CPU on the planned host.
    ran = {int(rank): (name, int(cpu)) for rank, name, cpu in RANK_CPUS.findall(output)}
    facts = {f.host: f for f in plan.facts}
    planned = {
        slot.rank: (slot.host, facts[slot.host].cpu.sockets[slot.socket].cores[slot.first_core].cpus[0]) for slot in plan.slots()
    }
    assert ran == planned, output
    # Each rank's variables, from the wrapper the script runs it through (Slurm's own CUDA_VISIBLE_DEVICES
    # for the batch step replaced): its host's GPUs in local-rank order, so the GPU it picks is its
    # planned one, distinct on each host, on the socket of its cores; NCCL's per-host and per-job values
    # the same on every rank (no RDMA here: no NCCL_IB_HCA)
    env = {int(rank): rest for rank, *rest in RANK_ENV.findall(output)}
    assert sorted(env) == list(range(6)), output
    picked: dict[str, list[str]] = {}
    for slot in plan.slots():
        local, size, gpu, cuda, hca, _ = env[slot.rank]
        assert (local, size, gpu, cuda, hca) == (str(slot.learner), "6", str(slot.learner), "0,1", "unset"), (slot, output)
        assert facts[slot.host].gpus[int(gpu)].socket == facts[slot.host].cpu.socket_of_cpu(ran[slot.rank][1]), (slot, output)
        picked.setdefault(slot.host, []).append(gpu)
    assert all(sorted(gpus) == ["0", "1"] for gpus in picked.values()) and len(picked) == 3, output
    assert len({rest[-1] for rest in env.values()}) == 1 and env[0][-1].startswith("="), output
