"""Each rank's NIC, the fabric interface, the per-rank wrapper (run by a real sh) and launcher forms."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from conftest import read_fixture, run_cli
from plan_support import minsky
from provision.errors import PlanError
from provision.facts.cpulist import format_ranges
from provision.facts.model import Gpu, GpuNicLink, NetInterface, OpenMPI, RdmaDevice, RdmaPort
from provision.facts.nics import parse_sysfs_rdma
from provision.facts.topo_matrix import parse_gpu_nic_matrix
from provision.launch.mpirun import mpirun_argv
from provision.launch.wrapper import inline_argv, wrapper_script
from provision.plans.dims import parse_dims
from provision.plans.nics import fabric_interface, master_address, plan_nics
from provision.plans.rankfile import plan_rankfile
from provision.probe.store import save_host

EPYC_TOPO = parse_gpu_nic_matrix(read_fixture("captures", "epyc-8gpu-10nic", "nvidia-smi-topo.txt"))
IB = RdmaPort(1, "ACTIVE", "LinkUp", "InfiniBand", "200 Gb/sec (4X HDR)")
RAILS = "=" + ",".join(f"mlx5_{i}:1" for i in range(8))


def nic(name, ifaces=("ib0", "eth0", "docker0"), address="10.0.0.1/24"):
    return tuple(NetInterface(i, True, (address if i != "docker0" else "172.17.0.1/16",)) for i in ifaces) + (
        NetInterface("lo", True, ("127.0.0.1/8",)),
    )


def eight_gpu(name, address="10.0.0.1/24", down=(), ifaces=("ib0", "eth0", "docker0")):
    """A 2-socket host with the 8 GPUs and 10 HCAs of the real EPYC topo -m capture."""
    facts = minsky(name)
    gpus = tuple(Gpu(i, "A100", f"0000:{i + 16:02x}:00.0", 40960, None, i // 4, "test") for i in range(8))
    rdma = tuple(
        RdmaDevice(f"mlx5_{i}", None, None, (dataclasses.replace(IB, state="DOWN") if i in down else IB,)) for i in range(10)
    )
    links = tuple(GpuNicLink(g, d, c, "nvidia-smi-topo") for (g, d), c in sorted(EPYC_TOPO.items()))
    return dataclasses.replace(
        facts,
        gpus=gpus,
        rdma=rdma,
        gpu_nics=links,
        interfaces=nic(name, ifaces, address),
        openmpi=OpenMPI("4.1.4", ("openmpi-bin",), None, "test"),
    )


def test_each_gpu_gets_its_nearest_port_and_ties_spread_over_ranks():
    plan = plan_rankfile(parse_dims("8x2x1"), [eight_gpu("a"), eight_gpu("b", "10.0.0.2/24")])
    nics = plan_nics(plan)
    on_a = [(r.local_rank, r.gpu, r.hca(), r.distance) for r in nics.of_host("a")]
    # GPU0 and GPU1 both have mlx5_0 and mlx5_1 at PXB: one each, not both on mlx5_0
    assert on_a == [(i, i, f"mlx5_{i}:1", "PXB") for i in range(8)]
    assert [r.hca() for r in nics.of_host("b")] == [f"mlx5_{i}:1" for i in range(8)]
    assert nics.interface == "ib0" and not nics.notes


def test_a_down_port_is_never_chosen_and_said():
    plan = plan_rankfile(parse_dims("8x1x1"), [eight_gpu("a", down=(1,))])
    nics = plan_nics(plan)
    assert [r.hca() for r in nics.of_host("a")][:2] == ["mlx5_0:1", "mlx5_0:1"]  # GPU1's other PXB port
    assert "a: mlx5_1 port 1 is DOWN: not used" in nics.notes


def test_roce_gets_the_v2_gid_index_on_its_interface_and_a_port_without_one_is_left_out():
    rdma = parse_sysfs_rdma(read_fixture("handwritten", "roce-2port", "sysfs-rdma.txt"))
    facts = dataclasses.replace(minsky("r"), rdma=rdma, interfaces=nic("r"))
    nics = plan_nics(plan_rankfile(parse_dims("2x1x1"), [facts], allow_no_gpu=True))
    assert {(r.hca(), r.gid_index) for r in nics.ranks} == {("mlx5_0:1", 3)}  # RoCE v2, IPv4-mapped
    assert any("mlx5_2 port 1 (RoCE) has no RoCE v2 GID on its interface ens2f0" in n for n in nics.notes)
    assert any("mlx5_1 port 1 is DOWN" in n for n in nics.notes)


def test_fabric_interface_is_exact_common_and_never_a_container_bridge():
    assert fabric_interface([eight_gpu("a"), eight_gpu("b")]) == "ib0"
    assert fabric_interface([eight_gpu("a", ifaces=("eth0", "docker0"))] * 2) == "eth0"
    with pytest.raises(PlanError) as error:
        fabric_interface([eight_gpu("a", ifaces=("ens1", "docker0")), eight_gpu("b", ifaces=("enp2s0",))])
    assert str(error.value).startswith(
        "no network interface is up with an IPv4 address on every host (a have ens1; b have enp2s0)"
    )


def test_master_address_is_one_every_host_reaches():
    hosts = [eight_gpu("a", "10.0.0.1/24"), eight_gpu("b", "10.0.0.2/24")]
    assert master_address(hosts, "ib0") == "10.0.0.1"
    with pytest.raises(PlanError, match="no address of a is in a subnet every other host has"):
        master_address([hosts[0], eight_gpu("b", "192.168.5.2/24")], "ib0")


TASKSET_STAND_IN = Path(__file__).parent / "standins" / "taskset"


def run_wrapper(script: str, env: dict[str, str]) -> dict[str, str]:
    """The environment ``env`` run through the wrapper by a real sh; where the wrapper binds the rank
    (torchrun), PROVISION_TEST_TASKSET holds the CPUs it asked taskset for (a test stand-in)."""
    done = subprocess.run(
        ["sh", "-c", script, "provision-rank", "env"],
        capture_output=True,
        text=True,
        env={"PATH": f"{TASKSET_STAND_IN}:{os.environ['PATH']}", **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def test_wrapper_sets_each_ranks_variables_from_its_local_rank_in_a_real_sh():
    plan = plan_rankfile(parse_dims("8x2x1"), [eight_gpu("a"), eight_gpu("b", "10.0.0.2/24")])
    script = wrapper_script(plan, plan_nics(plan))
    assert "h=" not in script  # the same on every host: keyed by local rank alone
    for launcher_variable in ("OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "HOROVOD_LOCAL_RANK", "SLURM_LOCALID"):
        got = run_wrapper(script, {launcher_variable: "3"})
        assert {k: got[k] for k in got if k.startswith(("CUDA", "UCX", "NCCL"))} == {
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",  # the host's GPUs in local-rank order: device 3 is its own
            "UCX_NET_DEVICES": "mlx5_3:1",
            "NCCL_IB_HCA": RAILS,  # one per host: GPU0-7's nearest ports, not mlx5_8/9 (SYS from every GPU)
            "NCCL_SOCKET_IFNAME": "=ib0",
        }
    bad = subprocess.run(
        ["sh", "-c", script, "provision-rank", "true"], capture_output=True, text=True, env={"PATH": os.environ["PATH"]}
    )
    assert bad.returncode == 2 and "no local rank" in bad.stderr
    far = subprocess.run(
        ["sh", "-c", script, "provision-rank", "true"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "LOCAL_RANK": "9"},
    )
    assert far.returncode == 2 and "local rank 9 is not in the plan for 8x2x1" in far.stderr


def test_every_wrapper_gives_torch_distributed_its_env_names_under_mpirun_only():
    """In every mpirun form (the plain/DDL line too) RANK, WORLD_SIZE and LOCAL_RANK come from
    OpenMPI's, so cuda:LOCAL_RANK of what the rank sees is its planned GPU; torchrun's own stay."""
    plan = plan_rankfile(parse_dims("8x2x1"), [eight_gpu("a"), eight_gpu("b", "10.0.0.2/24")])
    script = wrapper_script(plan, plan_nics(plan))
    mpi = {"OMPI_COMM_WORLD_RANK": "9", "OMPI_COMM_WORLD_SIZE": "16", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "RANK": "0"}
    got = run_wrapper(script, mpi)
    # OpenMPI's numbers win over a RANK the launching shell happened to export
    assert (got["RANK"], got["WORLD_SIZE"], got["LOCAL_RANK"]) == ("9", "16", "1")
    assert got["CUDA_VISIBLE_DEVICES"].split(",")[int(got["LOCAL_RANK"])] == "1"
    assert (got["GLOO_SOCKET_IFNAME"], got["NCCL_SOCKET_IFNAME"]) == ("ib0", "=ib0")
    assert "PROVISION_TEST_TASKSET" not in got  # mpirun bound it: the wrapper binds nothing
    torchrun = run_wrapper(script, {"LOCAL_RANK": "1", "RANK": "5", "WORLD_SIZE": "16", "PROVISION_HOST": "b"})
    assert (torchrun["RANK"], torchrun["LOCAL_RANK"], torchrun["CUDA_VISIBLE_DEVICES"]) == ("5", "1", "0,1,2,3,4,5,6,7")
    # torchrun binds nothing: the wrapper binds the rank to its planned cores (learner 1: socket 0, cores 5-9)
    slot = next(s for s in plan.slots() if s.host == "b" and s.learner == 1)
    cores = plan.facts[1].cpu.sockets[slot.socket].cores[slot.first_core : slot.last_core + 1]
    cpus = [cpu for core in cores for cpu in core.cpus]
    assert torchrun["PROVISION_TEST_TASKSET"] == format_ranges(cpus) and len(cpus) > 1
    # a user's -x RANK=... is the user's: the wrapper leaves it
    kept = run_wrapper(wrapper_script(plan, plan_nics(plan), skip=frozenset({"RANK"})), mpi)
    assert (kept["RANK"], kept["LOCAL_RANK"]) == ("0", "1")


def test_own_gpu_only_shows_each_rank_its_gpu_alone_as_device_0():
    plan = plan_rankfile(parse_dims("8x2x1"), [eight_gpu("a"), eight_gpu("b", "10.0.0.2/24")])
    script = wrapper_script(plan, plan_nics(plan), own_gpu_only=True)
    assert "# CUDA_VISIBLE_DEVICES: each rank its own GPU alone" in script
    for local in range(8):
        got = run_wrapper(script, {"OMPI_COMM_WORLD_LOCAL_RANK": str(local), "OMPI_COMM_WORLD_RANK": "0"})
        assert (got["CUDA_VISIBLE_DEVICES"], got["CUDA_DEVICE_ORDER"]) == (str(local), "PCI_BUS_ID")


def test_a_host_whose_ranks_cannot_each_have_a_gpu_is_refused_naming_what_each_would_get():
    a = dataclasses.replace(eight_gpu("a"), rdma=(), gpu_nics=())  # no NICs: the GPUs alone are per rank
    two = dataclasses.replace(a, host="b", hostname="b", gpus=a.gpus[:2])
    plan = plan_rankfile(parse_dims("4x2x1"), [a, two], allow_no_gpu=True)
    nics = plan_nics(plan)
    with pytest.raises(PlanError) as error:
        wrapper_script(plan, nics)
    assert str(error.value) == (
        "b: 2 GPU(s) for 4 ranks (local rank 0 GPU 0, 1 GPU 1, 2 none, 3 none): a rank without a GPU of its own has no "
        "device LOCAL_RANK; run at most 2 ranks a host, or pass -x CUDA_VISIBLE_DEVICES= for a CPU-only run"
    )
    # the user's empty CUDA_VISIBLE_DEVICES (no GPU at all) is a CPU-only run: no check, nothing exported
    cpu_only_script = wrapper_script(plan, nics, skip=frozenset({"CUDA_VISIBLE_DEVICES"}))
    cpu_only = run_wrapper(cpu_only_script, {"LOCAL_RANK": "3", "PROVISION_HOST": "b"})
    assert "CUDA_VISIBLE_DEVICES" not in cpu_only
    shared = [dataclasses.replace(r, gpu=0) if r.host == "a" else r for r in nics.ranks]
    with pytest.raises(PlanError, match=r"^a: two ranks would share one GPU \(local rank 0 GPU 0, 1 GPU 0, 2 GPU 0, 3 GPU 0\)"):
        wrapper_script(plan, dataclasses.replace(nics, ranks=tuple(shared)))


def test_wrapper_keys_by_host_when_hosts_differ_and_refuses_unsafe_names():
    ninth = Gpu(8, "A100", "0000:30:00.0", 40960, None, 1, "test")  # b has one GPU more, unplanned: hidden
    b = eight_gpu("b", "10.0.0.2/24")
    plan = plan_rankfile(parse_dims("8x2x1"), [eight_gpu("a"), dataclasses.replace(b, gpus=(*b.gpus, ninth))])
    script = wrapper_script(plan, plan_nics(plan))
    assert 'case "$h/$r" in' not in script and "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 " in script
    # GPUs on the other socket on b: its learners' cores differ, so its table is its own
    flipped = dataclasses.replace(b, gpus=tuple(dataclasses.replace(g, socket=1 - g.socket) for g in b.gpus))
    plan = plan_rankfile(parse_dims("8x2x1"), [eight_gpu("a"), flipped])
    script = wrapper_script(plan, plan_nics(plan))
    assert 'case "$h/$r" in' in script and "a/0) export" in script and "b/0) export" in script
    evil = dataclasses.replace(eight_gpu("a"), rdma=(RdmaDevice("mlx5_0;reboot", None, None, (IB,)),))
    from provision.errors import UnsafeValueError

    evil_plan = plan_rankfile(parse_dims("1x1x1"), [evil])
    with pytest.raises(UnsafeValueError):
        wrapper_script(evil_plan, plan_nics(evil_plan))


def test_mpirun_runs_the_command_through_the_inline_wrapper_and_can_skip_the_tree():
    plan = plan_rankfile(parse_dims("8x2x1"), [eight_gpu("a"), eight_gpu("b", "10.0.0.2/24")])
    script = wrapper_script(plan, plan_nics(plan))
    argv = mpirun_argv(plan, "x.rf", ["python", "train.py"], wrapper=script, no_tree_spawn=True)
    assert argv[-6:] == inline_argv(script, ["python", "train.py"])
    assert argv[argv.index("btl_tcp_if_include") + 1] == "ib0"
    assert argv[argv.index("plm_rsh_no_tree_spawn") - 1 :][:3] == ["--mca", "plm_rsh_no_tree_spawn", "1"]


def test_no_tree_spawn_per_openmpi_version():
    from provision.launch.mpirun import _no_tree_spawn

    # the parameter names each version's own info tool lists (ompi_info 4.1, prte_info 3.0)
    assert _no_tree_spawn((4, 1)) == ["--mca", "plm_rsh_no_tree_spawn", "1"]
    assert _no_tree_spawn((5, 0)) == ["--prtemca", "plm_ssh_no_tree_spawn", "1"]


@pytest.fixture
def facts_dir(tmp_path):
    for name, address in (("a", "10.0.0.1/24"), ("b", "10.0.0.2/24")):
        save_host(tmp_path / "facts", eight_gpu(name, address, down=(1,) if name == "b" else ()), {})
    return tmp_path / "facts"


def test_cli_launch_writes_the_wrapper_beside_the_rank_file_and_topology_draws_the_nics(facts_dir, tmp_path):
    noted = run_cli("launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(facts_dir), "--", "python", "t.py", cwd=tmp_path)
    said = " ".join(noted.stderr.split())
    assert noted.returncode == 0 and "b: no rail where a has mlx5_1:1 (mlx5_1:1 is DOWN): NCCL runs" in said
    args = ("launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(facts_dir), "--common-rails")
    done = run_cli(*args, "--", "python", "t.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "a: --common-rails left out mlx5_1:1" in " ".join(done.stderr.split())
    assert (tmp_path / "8x2x1.nic.sh").read_text().startswith("#!/bin/sh")
    assert "sh -c '#!/bin/sh" in done.stdout and "provision-rank python t.py" in done.stdout
    assert "b: mlx5_1 port 1 is DOWN: not used" in " ".join(done.stderr.split())
    shown = run_cli("topology", "8x2x1", "--hosts", "a,b", "--facts-dir", str(facts_dir), cwd=tmp_path)
    drawn = " ".join(shown.stdout.replace("│", " ").split())  # rich wraps long labels
    assert shown.returncode == 0 and "-> GPU 0 (A100, 0000:10:00.0) · NIC mlx5_0:1 (PXB)" in drawn
    torch = run_cli(*args, "--format", "torchrun", "--", "t.py", cwd=tmp_path)
    assert torch.returncode == 0 and "--master-addr=10.0.0.1" in torch.stdout
    listed = run_cli(*args, "--format", "hostfile", cwd=tmp_path)
    assert listed.stdout == "a slots=8\nb slots=8\n" and "NCCL_SOCKET_IFNAME==ib0" in listed.stderr


def test_cli_hosts_without_a_common_interface_exit_2_naming_them(tmp_path):
    for name, iface in (("a", "ens1"), ("b", "enp2s0")):
        save_host(tmp_path / "facts", eight_gpu(name, ifaces=(iface,)), {})
    done = run_cli("launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(tmp_path / "facts"), "--", "t", cwd=tmp_path)
    assert done.returncode == 2
    assert "a have ens1; b have enp2s0" in " ".join(done.stderr.split())
