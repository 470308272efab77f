"""Proof with the real launchers that every rank ends up on its planned GPU and cores (issue 32).

Nodes: sshd containers of the test images, two per image (OpenMPI 4.1: provision-node:test;
OpenMPI 5.0: provision-node5:test; horovodrun, deepspeed and torchrun over OpenMPI 4.1:
provision-ml:test), each with the TEST STAND-INS of tests/cluster/standins/gpu4 mounted (the images
themselves are unchanged):

- ``nvidia-smi``: four GPUs that do not exist, GPUs 0 and 2 on socket 1, GPUs 1 and 3 on socket 0;
- ``/etc/environment``: hwloc's synthetic topology ``package:2 numa:1 core:1 pu:1`` with
  ``HWLOC_THISSYSTEM=1`` for every login (PAM's pam_env: the probe's SSH session, mpirun's
  daemons, the shell the printed command is run in): two sockets of one core each, whose CPUs are
  this machine's real CPUs 0 and 1, so binding "socket 1, core 0" is a real sched_setaffinity to
  CPU 1, which the kernel then reports;
- ``lstopo-no-graphics``: the real one without the probe's ``HWLOC_COMPONENTS`` (which would make
  hwloc ignore the synthetic topology).

The machine has two CPUs, so a host runs two ranks: ``2xYx1`` plans GPUs 0 and 1 of the four,
learner 0 on socket 1 (GPU 0's), learner 1 on socket 0. OpenMPI 4 warns that it cannot bind memory
to the synthetic NUMA node 1 (the kernel has one node) and runs on.

Each form's printed command runs unchanged on the first node, in a login shell over SSH (as a user
would run it there), with a rank program that prints the GPU it would pick (item LOCAL_RANK of
CUDA_VISIBLE_DEVICES: ``cuda:LOCAL_RANK``; item 0 under --own-gpu-only; Horovod's program item
``hvd.local_rank()``) and its ``Cpus_allowed_list`` (the kernel's word on its binding). How cores
are checked: on every host the ranks pick distinct GPUs, each the planned one, and run on exactly
the planned slot's CPUs; the probed facts (hwloc's topology) put those CPUs on the socket that the
probed ``nvidia-smi topo -m`` gives the picked GPU. Slurm's sbatch form: tests/test_sbatch_cluster.py.

Horovod runs one host of two ranks: two ranks on each of two containers sharing this machine's two
CPUs busy-poll two to a CPU, and ``hvd.init()`` then never returns (tests/test_launchers_cluster.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from mpi_nodes import start_mpi_nodes, stop_mpi_nodes
from provision.plans.dims import parse_dims
from provision.plans.rankfile import plan_rankfile
from provision.probe.store import load_host

pytestmark = pytest.mark.cluster

HERE = Path(__file__).parent
STAND_INS = HERE / "cluster" / "standins" / "gpu4"
VOLUMES = (
    f"{STAND_INS / 'nvidia-smi'}:/usr/local/bin/nvidia-smi:ro",
    f"{STAND_INS / 'lstopo-no-graphics'}:/usr/local/bin/lstopo-no-graphics:ro",
    f"{STAND_INS / 'environment'}:/etc/environment:ro",
)
JOB = "/home/mpi/gpujob"
GPU_SOCKETS = (1, 0, 1, 0)  # what the nvidia-smi stand-in says
# The rank program: the GPU it would use (item LOCAL_RANK of CUDA_VISIBLE_DEVICES; item 0 with
# "first") and the CPUs it may run on. It lives a second: PRRTE 3.0 can miss the exit of a rank
# that ends within milliseconds (provision/launch/mpirun.py).
PICK_SH = r"""#!/bin/sh
i=$((${LOCAL_RANK:?no LOCAL_RANK} + 1))
[ "${1:-}" != first ] || i=1
gpu=$(printf '%s\n' "${CUDA_VISIBLE_DEVICES-}" | cut -d, -f"$i")
cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
echo "pick rank=${RANK:-none} local=$LOCAL_RANK host=$(hostname) gpu=${gpu:-none}" \
  "visible=${CUDA_VISIBLE_DEVICES-unset} order=${CUDA_DEVICE_ORDER:-unset} cpus=$cpus"
sleep 1
"""
# The same for the frameworks, in Python: Horovod's program picks item hvd.local_rank().
PICK_PY = r"""
import os, socket, sys
if sys.argv[1] == "horovod":
    import horovod.torch as hvd
    hvd.init()
    rank, local = hvd.rank(), hvd.local_rank()
else:
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
visible = os.environ.get("CUDA_VISIBLE_DEVICES")
gpu = visible.split(",")[local] if visible else "none"
cpus = next(line.split(":", 1)[1].strip() for line in open("/proc/self/status") if line.startswith("Cpus_allowed_list"))
print(f"pick rank={rank} local={local} host={socket.gethostname()} gpu={gpu} visible={visible} "
      f"order={os.environ.get('CUDA_DEVICE_ORDER', 'unset')} cpus={cpus}", flush=True)
if sys.argv[1] == "horovod":
    hvd.shutdown()
"""
# horovodrun tags each line with its rank ("[1,0]<stdout>:", mpirun --tag-output)
PICK = re.compile(
    r"^(?:\[\d+,\d+\]<stdout>:)?pick rank=(\d+) local=(\d+) host=(\S+) gpu=(\S+) visible=(\S+) order=(\S+) cpus=([\d,-]+)$",
    re.MULTILINE,
)


def cpus(text: str) -> set[int]:
    """``0-2,5`` -> {0, 1, 2, 5}."""
    found = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return found


@contextlib.contextmanager
def gpu4_nodes(prefix: str, image: str, work: Path, count: int = 2):
    """``count`` nodes of ``image`` with the stand-ins, probed as user mpi: (names, common options, facts dir)."""
    stop_mpi_nodes(prefix, count)  # a run that was killed may have left them
    try:
        names, _ = start_mpi_nodes(prefix, count, image, work, mesh=True, volumes=VOLUMES)
        common = ["-i", str(work / "hosts.yml"), "--known-hosts", str(work / "known_hosts"), "--facts-dir", str(work / "facts")]
        probed = run_cli("probe", *names, *common)
        assert probed.returncode == 0, probed.stdout + probed.stderr
        for name in names:  # what the stand-ins say, as probed: two sockets of one CPU each, four GPUs
            facts = load_host(work / "facts", name)
            assert [[core.cpus for core in socket.cores] for socket in facts.cpu.sockets] == [[(0,)], [(1,)]], facts.cpu
            assert tuple(gpu.socket for gpu in facts.gpus) == GPU_SOCKETS, facts.gpus
        yield names, common, work / "facts"
    finally:
        stop_mpi_nodes(prefix, count)


@pytest.fixture(scope="module")
def ompi4(tmp_path_factory):
    with gpu4_nodes(f"g4o{os.getpid()}n", "provision-node:test", tmp_path_factory.mktemp("ompi4")) as nodes:
        yield nodes


@pytest.fixture(scope="module")
def ompi5(tmp_path_factory):
    with gpu4_nodes(f"g5o{os.getpid()}n", "provision-node5:test", tmp_path_factory.mktemp("ompi5")) as nodes:
        yield nodes


@pytest.fixture(scope="module")
def ml(tmp_path_factory):
    subprocess.run(["bash", str(HERE / "cluster" / "ensure-ml-image.sh")], check=True, timeout=3600)
    with gpu4_nodes(f"g4m{os.getpid()}n", "provision-ml:test", tmp_path_factory.mktemp("ml")) as nodes:
        yield nodes


def printed(names: list[str], common: list[str], dims: str, folder: Path, *args: str) -> str:
    """What ``provision launch DIMS --hosts NAMES ARGS`` prints (its files written in ``folder``)."""
    done = run_cli("launch", dims, "--hosts", ",".join(names), *common, *args, cwd=folder)
    assert done.returncode == 0, done.stderr
    return done.stdout


def copy_job(names: list[str], folder: Path) -> None:
    """The files ``launch`` wrote and the rank programs, to JOB on every node (owned by mpi)."""
    (folder / "pick.sh").write_text(PICK_SH)
    (folder / "pick.py").write_text(PICK_PY)
    for name in names:
        subprocess.run(["docker", "exec", name, "install", "-d", "-o", "mpi", "-g", "mpi", JOB], check=True)
        subprocess.run(["docker", "cp", f"{folder}/.", f"{name}:{JOB}"], check=True, capture_output=True)
        subprocess.run(["docker", "exec", name, "chown", "-R", "mpi:mpi", JOB], check=True)


def login_shell(name: str, command: str) -> list[str]:
    """``command`` run by user mpi in JOB on ``name``, in an SSH login there (PAM gives it the node's
    /etc/environment, as it does mpirun's daemons), with the ML venv first on PATH."""
    inner = f"cd {JOB} && export PATH=/opt/ml/bin:$PATH && {command}"
    return ["docker", "exec", "-u", "mpi", name, "ssh", "-o", "BatchMode=yes", name, inner]


def run_printed(names: list[str], command: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(login_shell(names[0], command), capture_output=True, text=True, timeout=300)
    finally:  # a job that hung or failed leaves no rank behind to load the machine
        for name in names:
            subprocess.run(["docker", "exec", name, "pkill", "-9", "-u", "mpi", "-f", "python|orted|prted|mpirun|torchrun|sleep"],
                           capture_output=True)  # fmt: skip


def check_picks(
    output: str, names: list[str], facts_dir: Path, dims: str, *, own_gpu_only: bool = False, torchrun: bool = False
) -> None:
    """Every planned rank printed once, on its planned host, picking its planned GPU (distinct on
    each host) and running on exactly its planned CPUs, which lie on the picked GPU's socket. Its
    RANK: the rank file's (rank_gen's numbering), or torchrun's own (node rank x X + local rank)."""
    facts = {name: load_host(facts_dir, name) for name in names}
    plan = plan_rankfile(parse_dims(dims), [facts[name] for name in names])
    print("\n".join(sorted(m.group(0) for m in PICK.finditer(output))))
    found = PICK.findall(output)
    picks = {
        (host, int(local)): (int(rank), gpu, visible, order, allowed) for rank, local, host, gpu, visible, order, allowed in found
    }
    assert len(found) == len(picks) == plan.dims.learners, output
    assert sorted(picks) == sorted((slot.host, slot.learner) for slot in plan.slots()), output
    by_host: dict[str, list[int]] = {}
    for slot in plan.slots():
        rank, gpu, visible, order, allowed = picks[(slot.host, slot.learner)]
        host_index = next(h.index for h in plan.hosts if h.host == slot.host)
        assert rank == (host_index * plan.dims.x + slot.learner if torchrun else slot.rank), (slot, output)
        assert gpu == str(slot.learner), (slot, output)  # learner x drives GPU x
        assert visible == (gpu if own_gpu_only else ",".join(str(g) for g in range(plan.dims.x))) and order == "PCI_BUS_ID"
        by_host.setdefault(slot.host, []).append(int(gpu))
        socket = facts[slot.host].cpu.sockets[slot.socket]
        planned = {cpu for core in socket.cores[slot.first_core : slot.last_core + 1] for cpu in core.cpus}
        assert cpus(allowed) == planned, (slot, output)  # bound for real: one CPU of the node's two
        gpu_socket = facts[slot.host].gpus[int(gpu)].socket
        sockets = {facts[slot.host].cpu.socket_of_cpu(cpu) for cpu in cpus(allowed)}
        assert sockets == {gpu_socket} == {slot.socket}, (slot, output)
    assert all(len(set(gpus)) == len(gpus) == plan.dims.x for gpus in by_host.values()) and sorted(by_host) == sorted(names)
    # the stand-in's layout makes this mean something: learner 0 (GPU 0) on socket 1, not rank_gen's socket 0
    assert {slot.socket for slot in plan.slots() if slot.learner == 0} == {1}


@pytest.mark.parametrize("own_gpu_only", [False, True], ids=["local-rank-order", "own-gpu-only"])
@pytest.mark.parametrize("version", [4, 5])
def test_the_mpirun_line_as_printed_puts_every_rank_on_its_gpu_and_its_sockets_cores(request, tmp_path, version, own_gpu_only):
    """The default form (DDL's and Horovod-under-mpirun users' ``mpirun -rf``), OpenMPI 4 and 5:
    LOCAL_RANK, RANK, WORLD_SIZE from OpenMPI's, so cuda:LOCAL_RANK is the planned GPU."""
    names, common, facts_dir = request.getfixturevalue(f"ompi{version}")
    extra = ["--own-gpu-only"] if own_gpu_only else []
    command = printed(names, common, "2x2x1", tmp_path, *extra, "--", "sh", "pick.sh", *(["first"] if own_gpu_only else []))
    assert command.startswith("mpirun -n 4 ") and (" -rf 2x2x1.rf " if version == 4 else " rankfile:file=2x2x1.rf ") in command
    copy_job(names, tmp_path)
    ran = run_printed(names, command)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    check_picks(ran.stdout, names, facts_dir, "2x2x1", own_gpu_only=own_gpu_only)


def test_horovodrun_as_printed_puts_each_local_rank_on_its_gpu(ml, tmp_path):
    names, common, facts_dir = ml
    command = printed(names[:1], common, "2x1x1", tmp_path, "--format", "horovod", "--", "python", "pick.py", "horovod")
    assert command.startswith(f"horovodrun -np 2 -H {names[0]}:2 --mpi ") and " sh 2x1x1.nic.sh python pick.py" in command
    copy_job(names[:1], tmp_path)
    ran = run_printed(names[:1], command)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    check_picks(ran.stdout, names[:1], facts_dir, "2x1x1")


def test_deepspeed_as_printed_puts_every_rank_on_its_gpu(ml, tmp_path):
    names, common, facts_dir = ml
    command = printed(names, common, "2x2x1", tmp_path, "--format", "deepspeed", "--", "python", "pick.py", "deepspeed")
    assert command.startswith("env DS_ENV_FILE=2x2x1.deepspeed_env deepspeed --hostfile 2x2x1.hosts --launcher openmpi")
    copy_job(names, tmp_path)
    ran = run_printed(names, command)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    check_picks(ran.stdout, names, facts_dir, "2x2x1")


def test_torchrun_lines_as_printed_bind_every_rank_to_its_gpus_socket(ml, tmp_path):
    """torchrun binds nothing itself: the wrapper binds each rank to its planned cores (taskset),
    under torchrun's own LOCAL_RANK and RANK. Each host's line runs on that host, at once."""
    names, common, facts_dir = ml
    text = printed(names, common, "2x2x1", tmp_path, "--format", "torchrun", "--", "sh", "pick.sh")
    lines = {m[0]: m[1] for m in re.findall(r"^# on (\S+)\n(.+)$", text, re.MULTILINE)}
    assert sorted(lines) == sorted(names) and all(" --no-python sh 2x2x1.nic.sh sh pick.sh" in line for line in lines.values())
    copy_job(names, tmp_path)
    try:
        running = [subprocess.Popen(login_shell(name, lines[name]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                   for name in names]  # fmt: skip
        outputs = [process.communicate(timeout=300)[0] for process in running]
    finally:
        for name in names:
            subprocess.run(["docker", "exec", name, "pkill", "-9", "-u", "mpi", "-f", "torchrun|sleep"], capture_output=True)
    assert all(process.returncode == 0 for process in running), outputs
    check_picks("".join(outputs), names, facts_dir, "2x2x1", torchrun=True)
