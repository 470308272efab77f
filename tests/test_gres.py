"""gres.conf from facts (pure); tests/test_gres_slurmd.py feeds the result to the real slurmd."""

import dataclasses

import pytest

from plan_support import minsky
from provision.plans.gres import core_ranges, gpu_type, host_gres, plan_gres, socket_cores
from provision.plans.slurm import slurm_node_line


@pytest.mark.parametrize(
    ("model", "token"),
    [
        ("Tesla P100-SXM2-16GB", "tesla_p100-sxm2-16gb"),
        ("NVIDIA A100-SXM4-80GB", "nvidia_a100-sxm4-80gb"),
        ("Tesla V100-SXM3-32GB-H", "tesla_v100-sxm3-32gb-h"),
        ("NVIDIA GeForce RTX 3090", "nvidia_geforce_rtx_3090"),
        ("Quadro  RTX:8000,x=y", "quadro_rtx_8000_x_y"),  # no ':' ',' '=' or space reaches --gres=gpu:TYPE:N
    ],
)
def test_type_is_slurms_nvml_name_made_safe(model, token):
    assert gpu_type(model) == token


def test_core_ranges():
    assert core_ranges((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8"
    assert core_ranges([3]) == "3"


def test_minsky_cores_are_logical_core_indexes_per_socket():
    facts = minsky("node01")
    assert socket_cores(facts, 0) == tuple(range(10)) and socket_cores(facts, 1) == tuple(range(10, 20))
    gres = host_gres(facts)
    assert [line.text(gres.name) for line in gres.lines] == [
        "NodeName=node01 Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia0 Cores=0-9",
        "NodeName=node01 Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia1 Cores=0-9",
        "NodeName=node01 Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia2 Cores=10-19",
        "NodeName=node01 Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia3 Cores=10-19",
    ]
    assert gres.node_line == (
        "NodeName=node01 CPUs=160 Boards=1 SocketsPerBoard=2 CoresPerSocket=10 ThreadsPerCore=8 Gres=gpu:tesla_p100-sxm2-16gb:4"
    )


def test_identical_hosts_fold_into_one_hostlist_line_per_gpu():
    hosts = [minsky(f"node{n:02d}") for n in (1, 2, 3, 7)] + [minsky("node04", gpu_sockets=(1, 1, 0, 0))]
    plan = plan_gres(hosts, "9.9")
    assert plan.gres_conf.splitlines() == [
        "# gres.conf from probed facts (provision 9.9 slurm-gres)",
        "AutoDetect=off",
        "NodeName=node[01-03,07] Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia0 Cores=0-9",
        "NodeName=node[01-03,07] Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia1 Cores=0-9",
        "NodeName=node[01-03,07] Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia2 Cores=10-19",
        "NodeName=node[01-03,07] Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia3 Cores=10-19",
        "NodeName=node04 Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia0 Cores=10-19",
        "NodeName=node04 Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia1 Cores=10-19",
        "NodeName=node04 Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia2 Cores=0-9",
        "NodeName=node04 Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia3 Cores=0-9",
    ]
    assert plan.slurm_conf.splitlines() == [
        "GresTypes=gpu",
        "NodeName=node[01-04,07] CPUs=160 Boards=1 SocketsPerBoard=2 CoresPerSocket=10 ThreadsPerCore=8 "
        "Gres=gpu:tesla_p100-sxm2-16gb:4",
    ]
    assert plan.errors == () and plan.notes == ()


def test_unknown_affinity_gets_no_cores_and_a_note_never_a_guess():
    plan = plan_gres([minsky("node01", gpu_sockets=(0, None, 1, 1))])
    lines = plan.gres_conf.splitlines()
    assert lines[3] == "NodeName=node01 Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia1"
    assert plan.notes == ("host node01: GPU 1 (0001:01:00.0): socket affinity unknown; no Cores= (any core may use it)",)


def test_mixed_models_get_one_type_each():
    facts = minsky("node01")
    v100 = dataclasses.replace(facts.gpus[3], name="Tesla V100-SXM2-16GB")
    plan = plan_gres([dataclasses.replace(facts, gpus=(*facts.gpus[:3], v100)), minsky("node02")])
    assert "NodeName=node01 Name=gpu Type=tesla_v100-sxm2-16gb File=/dev/nvidia3 Cores=10-19" in plan.gres_conf
    assert "Gres=gpu:tesla_p100-sxm2-16gb:3,gpu:tesla_v100-sxm2-16gb:1" in plan.slurm_conf
    assert "NodeName=node02 Name=gpu Type=tesla_p100-sxm2-16gb File=/dev/nvidia3 Cores=10-19" in plan.gres_conf
    assert plan.notes == ("host node01: GPUs of 2 models (tesla_p100-sxm2-16gb, tesla_v100-sxm2-16gb): one Type= each",)


def test_models_that_normalise_alike_are_named():
    facts = minsky("node01")
    other = dataclasses.replace(
        facts, host="node02", hostname="node02", gpus=(dataclasses.replace(facts.gpus[0], name="tesla p100-SXM2-16GB"),)
    )
    plan = plan_gres([facts, other])
    assert plan.notes == ("Type=tesla_p100-sxm2-16gb stands for 2 model names (Tesla P100-SXM2-16GB, tesla p100-SXM2-16GB)",)


def test_unknown_gpus_and_clashing_names_are_errors_naming_the_host_others_kept():
    failed = dataclasses.replace(
        minsky("node02"),
        gpus=(),
        unavailable={"nvidia-smi-query": "exit 9: NVIDIA-SMI has failed because it couldn't communicate"},
    )
    unseen = dataclasses.replace(
        minsky("node03"), gpus=(), notes=("hwloc-xml shows 4 NVIDIA GPU(s) but nvidia-smi is not available",)
    )
    clash = dataclasses.replace(minsky("node01"), host="node01-bmc", hostname="node01.other.example")
    cpu_only = dataclasses.replace(minsky("login"), gpus=(), unavailable={"nvidia-smi-query": "not installed"})
    plan = plan_gres([minsky("node01"), failed, unseen, clash, cpu_only])
    assert plan.errors == (
        "host node02: nvidia-smi failed (exit 9: NVIDIA-SMI has failed because it couldn't communicate): its GPUs are unknown",
        "host node03: hwloc-xml shows 4 NVIDIA GPU(s) but nvidia-smi is not available: its GPUs are unknown "
        "(install the NVIDIA driver's nvidia-smi and probe again)",
        "host node01-bmc: it reports the host name 'node01', which is host node01's: left out (it would take that "
        "node's line); fix the host name on node01-bmc",
    )
    assert plan.notes == ("host login: no GPUs; no gres.conf lines",)
    assert plan.gres_conf.count("NodeName=node01 ") == 4
    assert plan.slurm_conf.splitlines()[1].startswith("NodeName=login CPUs=160 ")
    assert "Gres=" not in plan.slurm_conf.splitlines()[1]


def test_no_gpus_anywhere_needs_no_gres_types():
    plan = plan_gres([dataclasses.replace(minsky("login"), gpus=())])
    assert plan.gres_conf.splitlines()[1:] == ["AutoDetect=off"]
    assert plan.slurm_conf.splitlines() == [
        "NodeName=login CPUs=160 Boards=1 SocketsPerBoard=2 CoresPerSocket=10 ThreadsPerCore=8"
    ]


def test_gpu_index_not_list_order_names_the_device():
    facts = minsky("node01")
    gpus = tuple(reversed(facts.gpus))
    lines = host_gres(dataclasses.replace(facts, gpus=gpus)).lines
    assert [line.file for line in lines] == [f"/dev/nvidia{i}" for i in range(4)]


def _claiming(host: str, reported: str):
    return dataclasses.replace(minsky(host), hostname=reported)


@pytest.mark.parametrize("reported", ["DEFAULT", "default", "ALL", "All.example.com"])
def test_a_node_reporting_a_slurm_reserved_word_is_left_out_alone(reported):
    """Issue 24, finding 3: NodeName=DEFAULT sets every later line's values (slurm.conf(5))."""
    plan = plan_gres([minsky("node01"), _claiming("node02", reported), minsky("node03")])
    assert plan.errors == (
        f"host node02: it reports the host name {reported.split('.')[0]!r}, a word slurm.conf reserves (DEFAULT sets the "
        "values of every line after it): left out; fix the host name on node02",
    )
    assert "DEFAULT" not in plan.slurm_conf.upper().replace("NODENAME=NODE", "") and "ALL" not in plan.slurm_conf.upper()
    assert [line.split()[0] for line in plan.slurm_conf.splitlines()[1:]] == ["NodeName=node[01,03]"]
    assert "node02" not in plan.gres_conf


def test_a_node_claiming_another_nodes_name_never_takes_its_line():
    """node01 reporting node02: node02's line stays node02's, from node02's own facts; node01 is left out."""
    real = minsky("node02", gpus=2, gpu_sockets=(0, 1))
    plan = plan_gres([_claiming("node01", "node02"), real])
    assert plan.errors == (
        "host node01: it reports the host name 'node02', which is host node02's: left out (it would take that node's line); "
        "fix the host name on node01",
    )
    assert plan.slurm_conf.splitlines()[1].startswith("NodeName=node02 ") and "Gres=gpu:tesla_p100-sxm2-16gb:2" in plan.slurm_conf
    assert plan.gres_conf.count("NodeName=node02 ") == 2 and "node01" not in plan.gres_conf + plan.slurm_conf


def test_two_nodes_reporting_one_new_name_are_both_left_out():
    plan = plan_gres([_claiming("gpu1", "spare"), _claiming("gpu2", "spare"), minsky("gpu3")])
    assert plan.errors == (
        "host gpu1: it reports the host name 'spare', as host gpu2 does: left out; fix the host name on gpu1",
        "host gpu2: it reports the host name 'spare', as host gpu1 does: left out; fix the host name on gpu2",
    )
    assert [line.split()[0] for line in plan.slurm_conf.splitlines()[1:]] == ["NodeName=gpu3"]


def test_a_node_listed_first_never_takes_the_host_name_an_honest_node_reports():
    """gpu02's real host name is r1n07 (NodeHostname=r1n07: slurmd on it finds its line by that
    name). gpu01, listed first, reporting r1n07 too must not get NodeName=gpu01 NodeHostname=r1n07
    (slurmd on the real r1n07 would then run as gpu01, with gpu01's counts) while gpu02 is dropped:
    neither claim is believed, both are left out, each naming the other."""
    plan = plan_gres([_claiming("gpu01", "r1n07"), _claiming("gpu02", "r1n07.cluster"), minsky("gpu03")])
    assert "NodeHostname=r1n07" not in plan.slurm_conf and "gpu01" not in plan.slurm_conf + plan.gres_conf
    assert [line.split()[0] for line in plan.slurm_conf.splitlines()[1:]] == ["NodeName=gpu03"]
    assert [error.split(":")[0] for error in plan.errors] == ["host gpu01", "host gpu02"]
    assert plan.faults.keys() == {"gpu01", "gpu02"}


def test_node_name_is_the_inventorys_and_node_hostname_what_the_host_calls_itself():
    plan = plan_gres([_claiming("gpu01", "r1n07.cluster"), minsky("gpu02")])
    assert plan.errors == ()
    lines = plan.slurm_conf.splitlines()
    assert lines[1].startswith("NodeName=gpu01 NodeHostname=r1n07 CPUs=160 ") and lines[2].startswith("NodeName=gpu02 CPUs=160")
    assert plan.gres_conf.count("NodeName=gpu[01-02] ") == 4  # gres.conf names NodeNames
    assert slurm_node_line(_claiming("10.0.0.5", "n5")).startswith("NodeName=10.0.0.5 NodeHostname=n5 ")


def test_two_inventory_hosts_with_one_node_name_are_the_inventorys_error_not_a_nodes_fault():
    plan = plan_gres([minsky("n1.a"), minsky("n1.b"), minsky("n2")])
    assert plan.errors == (
        "host n1.b: NodeName 'n1' is also host n1.a's (the inventory's names, up to the first dot): "
        "NodeName must be unique; rename one in the inventory",
    )
    assert plan.faults == {}
    assert [line.split()[0] for line in plan.slurm_conf.splitlines()[1:]] == ["NodeName=n[1-2]"]
