"""Proof with the real launchers: `launch --format horovod|deepspeed` run as printed, across sshd containers.

Two nodes of the ML test image (tests/cluster/ml: the node image's OpenMPI 4.1 with PyTorch's CPU
build, Horovod 0.28.1 built against both, DeepSpeed 0.19.8), probed for real as user mpi. Their
facts then get the RDMA devices of a real sysfs capture and two stand-in GPU entries (the
containers have neither), so each rank has a GPU and a NIC of its own to be told about.

The printed command is run unchanged on the first node, in a folder holding the files `launch`
wrote (the wrapper also on the second node, at the same path, as `launch` says). Each rank starts
the framework for real (``hvd.init()``, ``deepspeed.init_distributed()``) and sums its rank over
the job with an allreduce: the job formed across both nodes, on the planned master and interface.
mpirun's --report-bindings says each rank ran on its planned host and cores.

Horovod runs one rank per node here: with two ranks bound in each of two containers that share
this machine's two cores, ``hvd.init()`` never returns, with Horovod's own ``--bind-to core`` as
with the rank file (each core then carries two busy-polling ranks; unbound, the same job runs).
Real nodes give each rank a core of its own.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import time
from pathlib import Path

import pytest
from test_mpirun_cluster import bindings

from conftest import read_fixture, run_cli
from mpi_nodes import start_mpi_nodes, stop_mpi_nodes
from provision.facts.model import Gpu
from provision.facts.nics import parse_sysfs_rdma
from provision.plans.rankcheck import parse_rankfile
from provision.probe.store import load_host, save_host

pytestmark = pytest.mark.cluster

HERE = Path(__file__).parent
PREFIX = "pml"
NODES = 2
IMAGE = "provision-ml:test"
JOB = "/home/mpi/job"
# The rank program: the framework's own rank, local rank and size, what the wrapper and the env
# file set, and an allreduce of the ranks (0 + 1 + ... + size-1) over the job.
RANK_PY = """
import os, socket, sys
import torch
if sys.argv[1] == "horovod":
    import horovod.torch as hvd
    hvd.init()
    rank, local, size = hvd.rank(), hvd.local_rank(), hvd.size()
    total = hvd.allreduce(torch.tensor([float(rank)]), op=hvd.Sum).item()
else:
    import deepspeed, torch.distributed as dist
    deepspeed.init_distributed(dist_backend="gloo")
    rank, local, size = dist.get_rank(), int(os.environ["LOCAL_RANK"]), dist.get_world_size()
    tensor = torch.tensor([float(rank)])
    dist.all_reduce(tensor)
    total = tensor.item()
e = os.environ.get
print(f"job {rank} {local} {size} {socket.gethostname()} cuda={e('CUDA_VISIBLE_DEVICES')} ucx={e('UCX_NET_DEVICES')} "
      f"hca={e('NCCL_IB_HCA')} ifname={e('NCCL_SOCKET_IFNAME')} gloo={e('GLOO_SOCKET_IFNAME')} "
      f"master={e('MASTER_ADDR')} sum={total:g}", flush=True)
# A clean shutdown: a process group left up at exit can end in std::terminate (its threads unjoined)
if sys.argv[1] == "horovod":
    hvd.shutdown()
else:
    dist.destroy_process_group()
"""
JOB_LINE = re.compile(
    r"job (\d+) (\d+) (\d+) (\w+) cuda=(\S+) ucx=(\S+) hca=(\S+) ifname=(\S+) gloo=(\S+) master=(\S+) sum=(\S+)$", re.MULTILINE
)
WHOLE_NODE = re.compile(r"\[(\w+):\d+\] MCW rank (\d+) is not bound \(or bound to all available processors\)")


@pytest.fixture(scope="module")
def ml_nodes(tmp_path_factory):
    """Two ML-image nodes, probed: (names, options with their facts given a real RDMA capture and
    stand-in GPUs, options with their facts as probed)."""
    subprocess.run(["bash", str(HERE / "cluster" / "ensure-ml-image.sh")], check=True, timeout=1800)
    work = tmp_path_factory.mktemp("ml")
    stop_mpi_nodes(PREFIX, NODES)  # a run that was killed may have left them
    names, _ = start_mpi_nodes(PREFIX, NODES, IMAGE, work, mesh=False)
    try:
        common = ["-i", str(work / "hosts.yml"), "--known-hosts", str(work / "known_hosts")]
        probed = run_cli("probe", *names, *common, "--facts-dir", str(work / "facts"))
        assert probed.returncode == 0, probed.stderr
        (real,) = parse_sysfs_rdma(read_fixture("captures", "hwloc-32em64t-mlx4", "sysfs-rdma.txt"))
        for name in names:
            facts = load_host(work / "facts", name)
            stand_in = "stand-in GPU (none in the container)"
            gpus = tuple(Gpu(i, stand_in, f"0000:0{i + 1}:00.0", None, None, None, None) for i in range(2))
            rdma = (real, dataclasses.replace(real, name="mlx4_1", pci_address="0000:83:00.0"))
            save_host(work / "nic-facts", dataclasses.replace(facts, gpus=gpus, rdma=rdma), {})
        yield names, [*common, "--facts-dir", str(work / "nic-facts")], [*common, "--facts-dir", str(work / "facts")]
    finally:
        stop_mpi_nodes(PREFIX, NODES)


def run_as_printed(names: list[str], folder: Path, command: str) -> subprocess.CompletedProcess:
    """The files ``launch`` wrote copied to JOB on every node (owned by mpi); ``command`` run there
    on the first node as mpi, as a user would in a login shell there."""
    (folder / "rank.py").write_text(RANK_PY)
    for name in names:
        subprocess.run(["docker", "exec", name, "install", "-d", "-o", "mpi", "-g", "mpi", JOB], check=True)
        subprocess.run(["docker", "cp", f"{folder}/.", f"{name}:{JOB}"], check=True, capture_output=True)
        subprocess.run(["docker", "exec", name, "chown", "-R", "mpi:mpi", JOB], check=True)
    try:
        return subprocess.run(
            ["docker", "exec", "-u", "mpi", "-w", JOB, "-e", "PATH=/opt/ml/bin:/usr/bin:/bin", names[0], "sh", "-c", command],
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:  # a job that hung or failed leaves no rank behind to load the machine
        for name in names:
            subprocess.run(["docker", "exec", name, "pkill", "-9", "-u", "mpi", "-f", "python|orted|mpirun"], capture_output=True)


def check_job(names: list[str], folder: Path, dims: str, done: subprocess.CompletedProcess, master: str | None) -> None:
    """Every planned rank ran, on its planned host and cores, with its planned variables, in one job."""
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    jobs = {int(m[0]): m[1:] for m in JOB_LINE.findall(done.stdout)}
    planned = {line.rank: line for line in parse_rankfile((folder / f"{dims}.rf").read_text())}
    ranks = len(planned)
    assert sorted(jobs) == sorted(planned) == list(range(ranks)), output
    bound = bindings(4, output)
    # a rank bound to every core of its node is said so by OpenMPI 4 (one rank a node here)
    for host, rank in WHOLE_NODE.findall(output):
        cores = int(subprocess.run(["docker", "exec", host, "nproc"], capture_output=True, text=True, check=True).stdout)
        bound[int(rank)] = (host, [(0, core) for core in range(cores)])
    assert sorted(bound) == sorted(planned), output
    for rank, (local, size, host, cuda, ucx, hca, ifname, gloo, got_master, total) in jobs.items():
        learner = int(local)
        # the allreduce of every rank: the job formed across the nodes
        assert (int(size), float(total)) == (ranks, float(sum(range(ranks)))), (rank, output)
        assert host == planned[rank].host, (rank, output)
        # ties (both HCAs at unknown distance to a stand-in GPU) spread: learner 0 -> mlx4_0, 1 -> mlx4_1;
        # each rank sees its host's GPUs in local-rank order, its own at index LOCAL_RANK
        per_host = sum(1 for line in planned.values() if line.host == host)
        assert cuda == ",".join(str(gpu) for gpu in range(per_host)) and cuda.split(",")[learner] == str(learner)
        # NCCL_IB_HCA: one value for every rank of every host, the host's rails (NVIDIA/nccl#1478)
        assert (ucx, hca, ifname, gloo) == (f"mlx4_{learner}:1", "=mlx4_0:1,mlx4_1:1", "=eth0", "eth0")
        if master is not None:
            assert got_master == master, (rank, output)
        assert bound[rank] == (planned[rank].host, [(planned[rank].socket, c) for c in planned[rank].cores]), (rank, output)
    assert {planned[r].host for r in planned} == set(names)


def printed(names: list[str], options: list[str], dims: str, folder: Path, *args: str) -> str:
    """The command ``provision launch DIMS --hosts NAMES OPTIONS ARGS`` prints, run in ``folder``."""
    done = run_cli("launch", dims, "--hosts", ",".join(names), *options, *args, cwd=folder)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_horovodrun_as_printed_runs_every_rank_where_planned(ml_nodes, tmp_path):
    names, common, _ = ml_nodes
    dims = f"1x{NODES}x1"  # one rank a node: see the module docstring
    args = ("--format", "horovod", "--report-bindings", "--", "python", "rank.py", "horovod")
    command = printed(names, common, dims, tmp_path, *args)
    assert command.startswith(f"horovodrun -np {NODES} -H {names[0]}:1,{names[1]}:1 --mpi '--binding-args=-rf {dims}.rf")
    started = time.monotonic()
    ran = run_as_printed(names, tmp_path, command)
    print(f"horovodrun {dims}: {time.monotonic() - started:.1f}s")
    check_job(names, tmp_path, dims, ran, None)


def test_horovodrun_without_a_wrapper_gets_the_exact_interface_from_mpi_args(ml_nodes, tmp_path):
    """No GPU, no RDMA in the facts: no wrapper, so NCCL_SOCKET_IFNAME can come only from the
    command: Horovod's own ``-x NCCL_SOCKET_IFNAME=eth0`` (a prefix) is overridden by the exact one."""
    names, _, as_probed = ml_nodes
    dims = f"1x{NODES}x1"
    program = ("sh", "-c", 'echo "ifname=$NCCL_SOCKET_IFNAME rank=$OMPI_COMM_WORLD_RANK"; sleep 1')
    command = printed(names, as_probed, dims, tmp_path, "--allow-no-gpu", "--format", "horovod", "--", *program)
    assert " sh -c " in command and ".nic.sh" not in command
    ran = run_as_printed(names, tmp_path, command)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert sorted(re.findall(r"ifname=(\S+) rank=(\d)", ran.stdout)) == [("=eth0", "0"), ("=eth0", "1")], ran.stdout


def test_deepspeed_as_printed_runs_every_rank_where_planned_on_the_planned_master(ml_nodes, tmp_path):
    names, common, _ = ml_nodes
    dims = f"2x{NODES}x1"
    args = ("--format", "deepspeed", "--report-bindings", "--", "python", "rank.py", "deepspeed")
    command = printed(names, common, dims, tmp_path, *args)
    env_file = dict(line.split("=", 1) for line in (tmp_path / f"{dims}.deepspeed_env").read_text().splitlines())
    master = env_file["MASTER_ADDR"]
    assert f"--master_addr {master} " in command and env_file["NCCL_SOCKET_IFNAME"] == "=eth0"
    started = time.monotonic()
    ran = run_as_printed(names, tmp_path, command)
    print(f"deepspeed {dims}: {time.monotonic() - started:.1f}s")
    # DeepSpeed's runner says the mpirun it ran: the rank file and interface are in it
    said = ran.stdout + ran.stderr
    assert re.search(rf"cmd = mpirun -n {2 * NODES} -hostfile {dims}\.hosts .*-rf {dims}\.rf --mca btl_tcp_if_include eth0", said)
    check_job(names, tmp_path, dims, ran, master)
