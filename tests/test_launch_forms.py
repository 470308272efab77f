"""horovodrun, deepspeed and torchrun forms of a plan: files, commands, the env file, bad input.

Cases as data: the plan's hosts and the expected command. The forms are proven against the real
launchers (Horovod 0.28.1 over OpenMPI 4.1, DeepSpeed 0.19.8's openmpi launcher) across sshd
containers in tests/test_launchers_cluster.py.
"""

from __future__ import annotations

import dataclasses
import shlex

import pytest
from test_plan_nics import eight_gpu, run_wrapper

from conftest import run_cli
from plan_support import minsky
from provision.errors import PlanError, UnsafeValueError
from provision.facts.model import OpenMPI
from provision.launch.forms import deepspeed_env, launch_form, sibling, torchrun_lines
from provision.launch.job import LaunchOptions, mpirun_job
from provision.plans.dims import parse_dims
from provision.plans.nics import plan_nics
from provision.plans.rankfile import plan_rankfile
from provision.probe.store import save_host

HOSTS = [eight_gpu("a"), eight_gpu("b", "10.0.0.2/24")]
V5 = [dataclasses.replace(f, openmpi=OpenMPI("5.0.7", ("openmpi-bin",), None, "test")) for f in HOSTS]
NO_GPU = [dataclasses.replace(minsky(n), gpus=(), rdma=(), interfaces=f.interfaces) for n, f in zip("ab", HOSTS, strict=True)]
WRAPPER = "per-rank wrapper (copy it to every host, same path)"

HOROVOD_CASES = [
    (
        "OpenMPI 4: -rf",
        HOSTS,
        "8x2x1",
        False,
        "horovodrun -np 16 -H a:8,b:8 --mpi '--binding-args=-rf 8x2x1.rf' --network-interfaces ib0 "
        "'--mpi-args=-x NCCL_SOCKET_IFNAME==ib0 -x GLOO_SOCKET_IFNAME=ib0' sh 8x2x1.nic.sh python train.py",
    ),
    (
        "OpenMPI 5: the rank file as a mapping, bindings reported",
        V5,
        "8x2x1",
        True,
        "horovodrun -np 16 -H a:8,b:8 --mpi '--binding-args=--map-by rankfile:file=8x2x1.rf --report-bindings' "
        "--network-interfaces ib0 '--mpi-args=-x NCCL_SOCKET_IFNAME==ib0 -x GLOO_SOCKET_IFNAME=ib0' "
        "sh 8x2x1.nic.sh python train.py",
    ),
    (
        "one host: no --network-interfaces (Horovod wants it to hold 127.0.0.1 there)",
        HOSTS[:1],
        "8x1x1",
        False,
        "horovodrun -np 8 -H a:8 --mpi '--binding-args=-rf 8x1x1.rf' "
        "'--mpi-args=-x NCCL_SOCKET_IFNAME==ib0 -x GLOO_SOCKET_IFNAME=ib0' sh 8x1x1.nic.sh python train.py",
    ),
    (
        "no GPU, no RDMA: no wrapper",
        NO_GPU,
        "2x2x1",
        False,
        "horovodrun -np 4 -H a:2,b:2 --mpi '--binding-args=-rf 2x2x1.rf' --network-interfaces ib0 "
        "'--mpi-args=-x NCCL_SOCKET_IFNAME==ib0 -x GLOO_SOCKET_IFNAME=ib0' python train.py",
    ),
]


def plan_of(hosts, dims):
    return plan_rankfile(parse_dims(dims), hosts, allow_no_gpu=True)


@pytest.mark.parametrize(("case", "hosts", "dims", "report", "expected"), HOROVOD_CASES, ids=[c[0] for c in HOROVOD_CASES])
def test_horovod_form(case, hosts, dims, report, expected):
    plan = plan_of(hosts, dims)
    form = launch_form("horovod", plan, plan_nics(plan), f"{dims}.rf", "RF", ["python", "train.py"], report_bindings=report)
    assert form.command == expected + "\n"
    assert [(f.what, f.path) for f in form.files][0] == ("rank file", f"{dims}.rf")
    assert ("sh" in shlex.split(expected)) == any(f.what == WRAPPER for f in form.files)


def test_horovod_values_are_shell_text_so_paths_in_them_are_quoted():
    plan = plan_of(HOSTS, "8x2x1")
    form = launch_form("horovod", plan, plan_nics(plan), "my runs/8x2x1.rf", "RF", ["python", "t.py"])
    binding = next(a for a in shlex.split(form.command) if a.startswith("--binding-args="))
    # Horovod pastes the value into mpirun's sh -c line: the path must come back whole
    assert shlex.split(binding.split("=", 1)[1]) == ["-rf", "my runs/8x2x1.rf"]


def test_deepspeed_form_files_command_and_env_file():
    plan = plan_of(HOSTS, "8x2x1")
    form = launch_form(
        "deepspeed",
        plan,
        plan_nics(plan),
        "8x2x1.rf",
        "RF",
        ["python", "train.py"],
        export=["NCCL_DEBUG"],
        allow_run_as_root=True,
    )
    assert [(f.what, f.path) for f in form.files] == [
        ("rank file", "8x2x1.rf"),
        (WRAPPER, "8x2x1.nic.sh"),
        ("hostfile", "8x2x1.hosts"),
        ("DeepSpeed env file", "8x2x1.deepspeed_env"),
    ]
    assert form.command == (
        "env DS_ENV_FILE=8x2x1.deepspeed_env deepspeed --hostfile 8x2x1.hosts --launcher openmpi --force_multi "
        "'--launcher_args=-rf 8x2x1.rf --mca btl_tcp_if_include ib0 --allow-run-as-root -x PATH -x LD_LIBRARY_PATH "
        "-x NCCL_DEBUG' --master_addr 10.0.0.1 --master_port 29500 --no_python sh 8x2x1.nic.sh python train.py\n"
    )
    files = {f.path: f.text for f in form.files}
    assert files["8x2x1.hosts"].splitlines()[1:] == ["a slots=8", "b slots=8"]
    assert files["8x2x1.deepspeed_env"] == (
        "NCCL_SOCKET_IFNAME==ib0\nGLOO_SOCKET_IFNAME=ib0\nMASTER_ADDR=10.0.0.1\nMASTER_PORT=29500\nUCX_TLS=all\n"
    )


@pytest.mark.parametrize("fmt", ["mpirun", "horovod", "deepspeed", "torchrun"])
def test_every_forms_ranks_see_their_hosts_gpus_in_local_rank_order_in_a_real_sh(fmt):
    """Programs pick cuda:LOCAL_RANK (DeepSpeed's set_device(local_rank), Horovod's
    set_device(hvd.local_rank()), DDP's cuda:LOCAL_RANK): device LOCAL_RANK of what each rank sees
    is its planned GPU, in every form, the plain mpirun/DDL line too."""
    plan = plan_of(HOSTS, "8x2x1")
    nics = plan_nics(plan)
    if fmt == "mpirun":
        script = mpirun_job(plan, nics, LaunchOptions(["python", "t.py"]), now="2026-12-01 15:00:00").wrapper.text
    else:
        form = launch_form(fmt, plan, nics, "8x2x1.rf", "RF", ["python", "t.py"])
        script = next(f.text for f in form.files if f.what == WRAPPER)
    for rank in nics.ranks:
        # under mpirun (horovod, deepspeed) OpenMPI's numbers; torchrun sets LOCAL_RANK itself
        launched = {"LOCAL_RANK": str(rank.local_rank)} if fmt == "torchrun" else {
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank.local_rank), "OMPI_COMM_WORLD_RANK": str(rank.rank),
            "OMPI_COMM_WORLD_SIZE": "16",
        }  # fmt: skip
        if fmt == "torchrun":
            launched["PROVISION_HOST"] = rank.host
        got = run_wrapper(script, launched)
        assert got["LOCAL_RANK"] == str(rank.local_rank)
        assert got["CUDA_VISIBLE_DEVICES"].split(",")[rank.local_rank] == str(rank.gpu), (fmt, rank)
        assert got["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"  # the same for every rank of the host
        assert got["NCCL_IB_HCA"] == nics.hosts[rank.host].hca() == "=" + ",".join(f"mlx5_{i}:1" for i in range(8))


@pytest.mark.parametrize("fmt", ["horovod", "deepspeed", "torchrun"])
def test_own_gpu_only_reaches_every_form_and_the_frameworks_are_told_what_it_costs(fmt):
    plan = plan_of(HOSTS, "8x2x1")
    nics = plan_nics(plan)
    form = launch_form(fmt, plan, nics, "8x2x1.rf", "RF", ["python", "t.py"], own_gpu_only=True)
    script = next(f.text for f in form.files if f.what == WRAPPER)
    got = run_wrapper(script, {"LOCAL_RANK": "3", "PROVISION_HOST": "a"})
    assert got["CUDA_VISIBLE_DEVICES"] == "3"
    assert any(note.startswith("--own-gpu-only: each rank sees its own GPU alone, as device 0;") for note in form.notes)


def test_options_a_form_has_no_use_for_are_named():
    plan = plan_of(HOSTS, "8x2x1")
    nics = plan_nics(plan)
    horovod = launch_form("horovod", plan, nics, "x.rf", "RF", ["t"], export=["NCCL_DEBUG"], allow_run_as_root=True)
    assert any("horovodrun passes its whole environment" in note for note in horovod.notes)
    torchrun = launch_form("torchrun", plan, nics, "x.rf", "RF", ["t"], report_bindings=True)
    assert torchrun.notes == ("torchrun runs no mpirun: --report-bindings not used",)
    deepspeed = launch_form("deepspeed", plan, nics, "runs/x.rf", "RF", ["t"])
    assert deepspeed.notes == (
        "run it on a in the folder holding these files (runs), with x.nic.sh at the same path on every host",
    )


def test_an_unsafe_or_absent_iface_is_refused_before_any_form():
    plan = plan_of(HOSTS, "8x2x1")
    with pytest.raises(UnsafeValueError, match="not an interface name"):
        plan_nics(plan, "eth9;id>/tmp/x")
    with pytest.raises(PlanError, match="interface eth9 is not up on: a, b"):
        plan_nics(plan, "eth9")
    # the same for one the nodes themselves name (`ip` output is hostile input)
    hostile = [eight_gpu(n, ifaces=("e;reboot",)) for n in "ab"]
    with pytest.raises(UnsafeValueError, match="not an interface name"):
        plan_nics(plan_of(hostile, "8x2x1"))


def test_deepspeed_env_file_reads_the_way_deepspeeds_runner_reads_it():
    plan = plan_of(HOSTS, "8x2x1")
    text = deepspeed_env(plan_nics(plan), "10.0.0.1")
    # runner.py: for var in fd.readlines(): key, val = var.split('=', maxsplit=1) -- any line
    # without "=" (a comment, a blank line) stops the launch
    pairs = [line.split("=", 1) for line in text.splitlines(keepends=True)]
    assert all(len(pair) == 2 for pair in pairs)
    assert {k.strip(): v.strip() for k, v in pairs}["NCCL_SOCKET_IFNAME"] == "=ib0"
    with pytest.raises(UnsafeValueError):
        deepspeed_env(plan_nics(plan), "10.0.0.1;reboot")


def test_deepspeed_writes_the_wrapper_even_without_gpus_for_the_env_names():
    plan = plan_of(NO_GPU, "2x2x1")
    form = launch_form("deepspeed", plan, plan_nics(plan), "2x2x1.rf", "RF", ["python", "t.py"])
    wrapper = next(f.text for f in form.files if f.what == WRAPPER)
    assert 'export RANK="$OMPI_COMM_WORLD_RANK"' in wrapper
    assert "--no_python sh 2x2x1.nic.sh python t.py" in form.command


def test_torchrun_without_gpus_still_gets_the_wrapper_it_names_for_the_interface():
    plan = plan_of(NO_GPU, "2x2x1")
    form = launch_form("torchrun", plan, plan_nics(plan), "2x2x1.rf", "RF", ["t.py"])
    assert "--no-python sh 2x2x1.nic.sh t.py" in form.command
    assert [f.path for f in form.files] == ["2x2x1.nic.sh"]


def test_torchrun_one_line_per_node_master_reachable():
    plan = plan_of(HOSTS, "8x2x1")
    text = torchrun_lines(plan, plan_nics(plan), "10.0.0.1", "8x2x1.nic.sh", ["python", "train.py"])
    assert text.splitlines() == [
        "# on a",  # the host told by its inventory name, never by what the node calls itself
        "PROVISION_HOST=a torchrun --nnodes=2 --node-rank=0 --nproc-per-node=8 --master-addr=10.0.0.1 --master-port=29500 "
        "--no-python sh 8x2x1.nic.sh python train.py",
        "# on b",
        "PROVISION_HOST=b torchrun --nnodes=2 --node-rank=1 --nproc-per-node=8 --master-addr=10.0.0.1 --master-port=29500 "
        "--no-python sh 8x2x1.nic.sh python train.py",
    ]


@pytest.mark.parametrize(
    ("fmt", "rankfile", "command", "export", "error", "message"),
    [
        ("mpich", "x.rf", ["t"], [], PlanError, "--format 'mpich': one of hostfile, horovod, deepspeed, torchrun, sbatch"),
        ("horovod", "x.rf", [], [], PlanError, "--format horovod: no command to launch"),
        ("deepspeed", "x.hosts", ["t"], [], PlanError, "the rank file and the hostfile would both be written there"),
        ("deepspeed", "x.rf", ["t"], ["A;B"], UnsafeValueError, "not NAME or NAME=VALUE"),
    ],
)
def test_bad_input_is_one_clear_error(fmt, rankfile, command, export, error, message):
    plan = plan_of(HOSTS, "8x2x1")
    with pytest.raises(error, match=message.replace("(", r"\(").replace("'", "'")):
        launch_form(fmt, plan, plan_nics(plan), rankfile, "RF", command, export=export)


def test_sibling_paths():
    assert sibling("runs/8x2x1.rf", ".nic.sh") == "runs/8x2x1.nic.sh"
    assert sibling("8x2x1", ".hosts") == "8x2x1.hosts"


def test_cli_writes_every_file_and_prints_the_command(tmp_path):
    for facts in HOSTS:
        save_host(tmp_path / "facts", facts, {})
    done = run_cli(
        "launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(tmp_path / "facts"), "--format", "deepspeed",
        "--", "python", "train.py", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("env DS_ENV_FILE=8x2x1.deepspeed_env deepspeed --hostfile 8x2x1.hosts")
    for name in ("8x2x1.rf", "8x2x1.nic.sh", "8x2x1.hosts", "8x2x1.deepspeed_env"):
        assert f"{tmp_path / name}" in done.stderr and (tmp_path / name).is_file()
    assert (tmp_path / "8x2x1.rf").read_text().count("\nrank ") == 16
    ddl = run_cli(
        "launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(tmp_path / "facts"), "--format", "horovod",
        "--ddl-mode", "n", "--", "t", cwd=tmp_path,
    )  # fmt: skip
    assert ddl.returncode == 2 and "--format horovod has no DDL" in ddl.stderr
    run = run_cli(
        "launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(tmp_path / "facts"), "--format", "deepspeed", "--run",
        "--", "t", cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 2 and "with --format deepspeed, run the printed command" in run.stderr
