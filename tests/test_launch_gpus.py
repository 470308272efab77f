"""Each rank's GPU under every form (issue 32), the bad input refused before anything is written, and
interface names as NCCL reads them. The wrapper runs in a real sh; the GPU a program picks is item
LOCAL_RANK of what it sees (item 0 with --own-gpu-only). The same, run by the real launchers on
sshd containers: tests/test_gpu_pick_cluster.py."""

from __future__ import annotations

import dataclasses

import pytest
from test_plan_nics import eight_gpu, run_wrapper

from conftest import run_cli
from provision.errors import PlanError
from provision.launch.export_lint import check_gpu_exports, export_warnings
from provision.launch.job import LaunchOptions, launch_output
from provision.plans.dims import parse_dims
from provision.plans.nics import plan_nics
from provision.plans.rankfile import plan_rankfile
from provision.probe.store import save_host

NOW = "2026-12-01 15:00:00"
FORMS = (None, "sbatch", "horovod", "deepspeed", "torchrun")


def two_hosts(dims: str = "4x2x1"):
    plan = plan_rankfile(parse_dims(dims), [eight_gpu("a"), eight_gpu("b", "10.0.0.2/24")])
    return plan, plan_nics(plan)


def picked(env: dict[str, str], own_gpu_only: bool = False) -> int:
    return int(env["CUDA_VISIBLE_DEVICES"].split(",")[0 if own_gpu_only else int(env["LOCAL_RANK"])])


@pytest.mark.parametrize("own_gpu_only", [False, True])
def test_the_issues_table_every_rank_of_a_host_picks_its_planned_gpu(own_gpu_only):
    """The issue's table: with each rank's own GPU first, local rank 1 picked GPU 0 (cuda:1 of
    1,0,2,3) and GPU 3 idled. Now every local rank picks its own, under OpenMPI's numbers."""
    plan, nics = two_hosts()
    script = launch_output(plan, nics, LaunchOptions(["t"], own_gpu_only=own_gpu_only), None, NOW)[1].wrapper.text
    for host in ("a", "b"):
        picks = []
        for rank in nics.of_host(host):
            launched = {"OMPI_COMM_WORLD_LOCAL_RANK": str(rank.local_rank), "OMPI_COMM_WORLD_RANK": str(rank.rank),
                        "OMPI_COMM_WORLD_SIZE": "8"}  # fmt: skip
            env = run_wrapper(script, launched)
            assert (env["RANK"], env["WORLD_SIZE"]) == (str(rank.rank), "8")
            assert env["CUDA_VISIBLE_DEVICES"] == (str(rank.gpu) if own_gpu_only else "0,1,2,3")
            picks.append(picked(env, own_gpu_only))
        assert picks == [0, 1, 2, 3] == [r.gpu for r in nics.of_host(host)]


def test_a_user_cuda_visible_devices_that_puts_a_rank_elsewhere_is_refused_in_every_form(tmp_path):
    plan, nics = two_hosts()
    for fmt in FORMS:
        options = LaunchOptions(["t"], export=["CUDA_VISIBLE_DEVICES=1,0,2,3"], rankfile=tmp_path / "x.rf")
        with pytest.raises(PlanError) as error:
            launch_output(plan, nics, options, fmt, NOW)
        assert str(error.value) == (
            "-x CUDA_VISIBLE_DEVICES=1,0,2,3: every rank of a would see 1,0,2,3, so by device LOCAL_RANK local rank "
            "0 GPU 1 (planned 0), 1 GPU 0 (planned 1), 2 GPU 2 (planned 2), 3 GPU 3 (planned 3) (and on b); drop it: "
            "each rank's CUDA_VISIBLE_DEVICES comes from the plan (-x CUDA_VISIBLE_DEVICES= for no GPU at all)"
        ), fmt
    with pytest.raises(PlanError, match=r"local rank 0 GPU 0 \(planned 0\), 1 no GPU \(planned 1\)"):
        check_gpu_exports(nics, ["CUDA_VISIBLE_DEVICES=0"])
    with pytest.raises(PlanError, match=r"so by device 0 local rank 0 GPU 0 \(planned 0\), 1 GPU 0 \(planned 1\)"):
        check_gpu_exports(nics, ["CUDA_VISIBLE_DEVICES=0,1,2,3"], own_gpu_only=True)
    with pytest.raises(PlanError, match="^-x CUDA_DEVICE_ORDER=FASTEST_FIRST: CUDA would number the GPUs fastest first"):
        check_gpu_exports(nics, ["CUDA_DEVICE_ORDER=FASTEST_FIRST"])
    # what gives every rank its planned GPU is the user's to say; so is no GPU at all
    for fine in ("CUDA_VISIBLE_DEVICES=0,1,2,3", "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7", "CUDA_VISIBLE_DEVICES=",
                 "CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES"):  # fmt: skip
        check_gpu_exports(nics, [fine])
    assert export_warnings(plan, nics, ["CUDA_VISIBLE_DEVICES="]) == [
        "-x CUDA_VISIBLE_DEVICES=: every rank sees no GPU (a CPU-only run)"
    ]
    assert export_warnings(plan, nics, ["CUDA_VISIBLE_DEVICES=0,1,2,3"]) == []


def test_the_cli_refuses_bad_gpu_input_with_one_line_and_writes_nothing(tmp_path):
    facts = tmp_path / "facts"
    save_host(facts, eight_gpu("a"), {})
    save_host(facts, eight_gpu("b", "10.0.0.2/24"), {})
    common = ("--hosts", "a,b", "--facts-dir", str(facts))
    cases = [
        (["-x", "CUDA_VISIBLE_DEVICES=3"], "-x CUDA_VISIBLE_DEVICES=3: every rank of a would see 3, so by device LOCAL_RANK"),
        (["--iface", "ib0:1"], "--iface ib0:1: NCCL reads what follows ':' in NCCL_SOCKET_IFNAME as a port"),
    ]
    for args, said in cases:
        for fmt in ([], ["--format", "torchrun"], ["--format", "sbatch"]):
            done = run_cli("launch", "4x2x1", *common, *args, *fmt, "--", "python", "t.py", cwd=tmp_path)
            assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
            assert done.stderr.count("provision: error:") == 1 and said in " ".join(done.stderr.split()), done.stderr
            assert not list(tmp_path.glob("4x2x1*")) and done.stdout == "", (args, fmt)
    # fewer GPUs than ranks on a host: planned only with --allow-no-gpu, then refused, naming each rank's lot
    save_host(facts, dataclasses.replace(eight_gpu("b", "10.0.0.2/24"), gpus=eight_gpu("b").gpus[:2]), {})
    done = run_cli("launch", "4x2x1", *common, "--allow-no-gpu", "--common-rails", "--", "t", cwd=tmp_path)
    assert done.returncode == 2 and not list(tmp_path.glob("4x2x1*")), done.stderr
    assert "b: 2 GPU(s) for 4 ranks (local rank 0 GPU 0, 1 GPU 1, 2 none, 3 none)" in " ".join(done.stderr.split())
    cpu_only = run_cli(
        "launch", "4x2x1", *common, "--allow-no-gpu", "--common-rails", "-x", "CUDA_VISIBLE_DEVICES=", "--", "t", cwd=tmp_path
    )
    assert cpu_only.returncode == 0, cpu_only.stderr
    assert "every rank sees no GPU (a CPU-only run)" in " ".join(cpu_only.stderr.split())
    assert "CUDA_VISIBLE_DEVICES" not in (tmp_path / "4x2x1.nic.sh").read_text().split("esac")[-2]


def test_an_alias_in_nccl_socket_ifname_is_said_as_nccl_reads_it():
    plan, nics = two_hosts()
    assert export_warnings(plan, nics, ["NCCL_SOCKET_IFNAME==ib0:1"])[0] == (
        "-x NCCL_SOCKET_IFNAME==ib0:1: NCCL reads what follows ':' as a port, so ib0:1 is interface ib0: an alias "
        "label (ib0:1) is never matched by name (give its device)"
    )
    with pytest.raises(PlanError, match=r"^--iface eth0:1: .* give --iface eth0, the device the alias address is on$"):
        plan_nics(plan, "eth0:1")
