"""NCCL's own rules for the launch environment, kept as data (fixtures/nccl_rules.json, each case
with the NCCL source line, doc section or maintainer's word it comes from), run against the
planner and the real sh wrapper; then the user's -x lint, and a node's bad or hostile facts."""

from __future__ import annotations

import dataclasses
import json

import pytest
from test_plan_nics import eight_gpu, nic, run_wrapper

from conftest import FIXTURES, read_fixture
from plan_support import minsky
from provision.errors import PlanError, UnsafeValueError
from provision.facts.model import NetInterface, OpenMPI
from provision.facts.nics import parse_sysfs_rdma
from provision.launch.export_lint import _entries, _matches, export_warnings
from provision.launch.mpirun import openmpi_version
from provision.launch.wrapper import planned_cpus, wrapper_script
from provision.plans.dims import parse_dims
from provision.plans.nics import master_address, plan_nics
from provision.plans.rankfile import plan_rankfile

RULES = json.loads((FIXTURES / "nccl_rules.json").read_text())


@pytest.mark.parametrize("case", RULES["match"], ids=[f"{c['variable']}={c['value']}" for c in RULES["match"]])
def test_values_are_read_as_nccl_reads_them(case):
    """The lint's parser, given NCCL's documented examples, uses what NCCL uses."""
    exclude, exact, entries = _entries(case["value"])
    used = []
    for candidate in case["names"]:
        name, _, port = candidate.partition(":")
        hit = any(_matches([name], entry, exact) and (p is None or not port or int(port) == p) for entry, p in entries)
        if hit != exclude:
            used.append(candidate)
    assert used == case["used"], case["source"]


def _hosts(case):
    made = []
    for spec in case["hosts"]:
        if spec.get("roce"):
            rdma = parse_sysfs_rdma(read_fixture("handwritten", "roce-2port", "sysfs-rdma.txt"))
            facts = dataclasses.replace(minsky(spec["name"]), rdma=rdma, interfaces=nic(spec["name"]))
        else:
            facts = eight_gpu(spec["name"], f"10.0.0.{len(made) + 1}/24", down=tuple(spec.get("down", ())))
        made.append(facts)
    return made


def _seen(case) -> dict[str, dict[str, str]]:
    """{host/local-rank: the variables that rank gets}, from the real wrapper run by sh."""
    plan = plan_rankfile(parse_dims(case["dims"]), _hosts(case), allow_no_gpu=case.get("allow_no_gpu", False))
    nics = plan_nics(plan, case.get("iface"), common_rails=case.get("common_rails", False))
    script = wrapper_script(plan, nics, own_gpu_only=case.get("own_gpu_only", False))
    seen = {}
    for rank in nics.ranks:
        launched = {
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank.local_rank), "OMPI_COMM_WORLD_RANK": str(rank.rank),
            "OMPI_COMM_WORLD_SIZE": str(plan.dims.learners),
        }  # fmt: skip
        seen[f"{rank.host}/{rank.local_rank}"] = run_wrapper(script, launched)
    return seen, nics


def _picked(env: dict[str, str], own_gpu_only: bool) -> int:
    """The GPU a program picks: item LOCAL_RANK of CUDA_VISIBLE_DEVICES (``cuda:LOCAL_RANK``), or
    item 0 (``cuda:0``) when the rank sees its own GPU alone."""
    return int(env["CUDA_VISIBLE_DEVICES"].split(",")[0 if own_gpu_only else int(env["LOCAL_RANK"])])


@pytest.mark.parametrize("case", RULES["plan"], ids=[c["id"] for c in RULES["plan"]])
def test_the_launch_environment_follows_nccls_rules(case):
    if "error" in case:
        with pytest.raises(PlanError) as error:
            _seen(case)
        assert case["error"] in str(error.value), case["source"]
        return
    seen, nics = _seen(case)
    for name in case.get("same_on_every_rank_of_a_host", []):
        for host in {key.split("/")[0] for key in seen}:
            assert len({env.get(name) for key, env in seen.items() if key.startswith(f"{host}/")}) == 1, (name, case["source"])
    for host, variables in case.get("host", {}).items():
        for key, env in seen.items():
            if key.startswith(f"{host}/"):
                assert {name: env.get(name) for name in variables} == variables, (key, case["source"])
    for key, variables in case.get("rank", {}).items():
        assert {name: seen[key].get(name) for name in variables} == variables, (key, case["source"])
    for host, picks in case.get("picks", {}).items():
        ranks = sorted((key for key in seen if key.startswith(f"{host}/")), key=lambda key: int(key.split("/")[1]))
        assert [_picked(seen[key], case.get("own_gpu_only", False)) for key in ranks] == picks, (host, case["source"])
    for name in case.get("absent", []):
        assert all(name not in env for env in seen.values()), (name, case["source"])
    if "note" in case:
        assert any(note.startswith(case["note"]) for note in nics.notes), nics.notes


def test_a_host_with_no_active_port_is_named_and_common_rails_disables_ib_for_every_host():
    hosts = [eight_gpu("a"), eight_gpu("b", "10.0.0.2/24", down=tuple(range(10)))]
    plan = plan_rankfile(parse_dims("8x2x1"), hosts)
    with pytest.raises(PlanError, match=r"b: no mlx5_0:1 \(DOWN\); no mlx5_1:1 \(DOWN\)"):
        plan_nics(plan)
    nics = plan_nics(plan, common_rails=True)
    said = [n for n in nics.notes if "NCCL_IB_DISABLE=1" in n]
    assert said == ["no rail is common to every host: NCCL_IB_DISABLE=1 for this job (every host on sockets)"]
    env = run_wrapper(wrapper_script(plan, nics), {"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_RANK": "1"})
    assert env["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_HCA" not in env


def test_a_rate_or_link_layer_that_differs_is_named():
    b = eight_gpu("b", "10.0.0.2/24")
    slow = dataclasses.replace(b.rdma[2], ports=(dataclasses.replace(b.rdma[2].ports[0], rate="100 Gb/sec (4X EDR)"),))
    b = dataclasses.replace(b, rdma=(*b.rdma[:2], slow, *b.rdma[3:]))
    with pytest.raises(PlanError, match=r"b: mlx5_2:1 at 100 Gb/sec \(4X EDR\) \(others 200 Gb/sec \(4X HDR\)\)"):
        plan_nics(plan_rankfile(parse_dims("8x2x1"), [eight_gpu("a"), b]))


def test_different_gpu_counts_are_said_naming_the_host_and_variable():
    a = eight_gpu("a")
    b = eight_gpu("b", "10.0.0.2/24")
    b = dataclasses.replace(b, gpus=(*b.gpus, dataclasses.replace(b.gpus[7], index=8, bus_id="0000:30:00.0")))
    nics = plan_nics(plan_rankfile(parse_dims("8x2x1"), [a, b]))
    assert any(n.startswith("hosts have different GPU counts (b has 9; the others 8): CUDA_VISIBLE_DEVICES") for n in nics.notes)


def test_user_exports_are_linted_one_line_each_naming_host_and_value():
    a = dataclasses.replace(eight_gpu("a", down=(5,)), interfaces=(*nic("a"), NetInterface("ib1", True, ("10.1.0.1/24",))))
    plan = plan_rankfile(parse_dims("8x2x1"), [a, eight_gpu("b", "10.0.0.2/24", down=(5,))])
    nics = plan_nics(plan)
    warnings = export_warnings(
        plan,
        nics,
        ["NCCL_SOCKET_IFNAME=ib", "NCCL_IB_HCA=mlx5_1,=mlx5_5:1", "NCCL_IB_HCA=$LOCAL_HCA", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG"],
    )
    assert (
        "-x NCCL_SOCKET_IFNAME=ib: ib is a prefix: it matches ib0, ib1 (NCCL_SOCKET_IFNAME==ib0 for exactly one) on a" in warnings
    )
    assert any(w.startswith("-x NCCL_IB_HCA=mlx5_1,=mlx5_5:1: =mlx5_5 is absent on a, b") for w in warnings)
    assert any(w.startswith("-x NCCL_IB_HCA=$LOCAL_HCA: mpirun passes it as it is") for w in warnings)
    assert any(w.startswith("-x NCCL_IB_HCA=mlx5_1,=mlx5_5:1: replaces the plan's NCCL_IB_HCA on a, b") for w in warnings)
    assert any(w.startswith("-x CUDA_VISIBLE_DEVICES: the wrapper sets CUDA_VISIBLE_DEVICES itself on a, b") for w in warnings)
    assert not any("NCCL_DEBUG" in w for w in warnings)
    down = export_warnings(plan, nics, ["NCCL_IB_HCA==mlx5_5:1,mlx5_10"])
    assert "-x NCCL_IB_HCA==mlx5_5:1,mlx5_10: mlx5_5:1 is DOWN on a, b" in down
    assert "-x NCCL_IB_HCA==mlx5_5:1,mlx5_10: mlx5_10 is absent on a, b" in down
    # the user's value is the one every rank gets: the wrapper leaves it alone
    script = wrapper_script(plan, nics, skip=frozenset({"NCCL_IB_HCA"}))
    assert "NCCL_IB_HCA" not in run_wrapper(script, {"OMPI_COMM_WORLD_LOCAL_RANK": "0"})


def test_a_node_claiming_another_hosts_name_fails_alone_and_never_takes_its_entries():
    """issue 24 finding 3: node01 reporting hostname=node02 got node02's wrapper entries."""
    node01 = dataclasses.replace(eight_gpu("node01"), hostname="node02")
    node02 = eight_gpu("node02", "10.0.0.2/24")
    with pytest.raises(PlanError) as error:
        plan_nics(plan_rankfile(parse_dims("8x2x1"), [node01, node02]))
    assert str(error.value).startswith("node01: reports hostname 'node02', a name of node02 in this job")
    # hosts whose settings differ are keyed by inventory name, told by mpirun's rank: not by hostname
    b = dataclasses.replace(eight_gpu("node02", "10.0.0.2/24"), hostname="something-else")
    b = dataclasses.replace(b, gpus=tuple(dataclasses.replace(g, socket=1 - g.socket) for g in b.gpus))  # other cores
    plan = plan_rankfile(parse_dims("8x2x1"), [eight_gpu("node01"), b])
    script = wrapper_script(plan, plan_nics(plan))
    assert "something-else" not in script and "node02/0)" in script
    rank = next(s.rank for s in plan.slots() if s.host == "node02" and s.learner == 1)
    env = run_wrapper(script, {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_RANK": str(rank)})
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7" and "PROVISION_TEST_TASKSET" not in env  # mpirun binds
    torchrun = run_wrapper(script, {"LOCAL_RANK": "1", "PROVISION_HOST": "node01"})
    slot = next(s for s in plan.slots() if s.host == "node01" and s.learner == 1)
    assert torchrun["PROVISION_TEST_TASKSET"] == planned_cpus(plan)[slot.rank] and slot.socket == 0


def test_bad_node_data_fails_that_node_with_one_line_never_a_traceback():
    """issue 24 finding 9: `inet 172.17.0.5/99` and an OpenMPI version `4` raised out of launch."""
    a = eight_gpu("a")
    odd = dataclasses.replace(eight_gpu("b"), interfaces=(NetInterface("ib0", True, ("172.17.0.5/99",)),))
    with pytest.raises(PlanError, match=r"^b: ip-addr lists '172.17.0.5/99', not an IPv4 address with a prefix length$"):
        master_address([a, odd], "ib0")
    four = dataclasses.replace(eight_gpu("b"), openmpi=OpenMPI("4", ("openmpi-bin",), None, "test"))
    with pytest.raises(PlanError, match=r"^b: OpenMPI version '4' is not MAJOR.MINOR\[.PATCH\]$"):
        openmpi_version([a, four])


def test_every_form_gives_each_host_the_same_nccl_values_and_the_users_value_reaches_each():
    from provision.launch.forms import launch_form
    from provision.launch.mpirun import mpirun_argv

    plan = plan_rankfile(parse_dims("8x2x1"), [eight_gpu("a"), eight_gpu("b", "10.0.0.2/24")])
    nics = plan_nics(plan)
    per_host = ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
    scripts = {"mpirun": wrapper_script(plan, nics)}
    for fmt in ("horovod", "deepspeed", "torchrun"):
        form = launch_form(fmt, plan, nics, "8x2x1.rf", "RF", ["t.py"], export=["NCCL_DEBUG=INFO"])
        scripts[fmt] = next(f.text for f in form.files if f.path.endswith(".nic.sh"))
        assert "NCCL_DEBUG=INFO" in form.command, fmt  # horovod's --mpi-args, deepspeed's -x, torchrun's prefix
    seen = {}
    for script in scripts.values():
        for rank in nics.ranks:
            launched = {"OMPI_COMM_WORLD_LOCAL_RANK": str(rank.local_rank), "OMPI_COMM_WORLD_RANK": str(rank.rank)}
            env = run_wrapper(script, launched)
            seen.setdefault(rank.host, set()).add(tuple(env.get(name) for name in per_host))
    assert all(len(values) == 1 for values in seen.values()), seen
    argv = mpirun_argv(plan, "x.rf", ["t"], export=["NCCL_DEBUG=INFO"])
    assert argv[argv.index("NCCL_DEBUG=INFO") - 1] == "-x"
    with pytest.raises(UnsafeValueError, match="not NAME or NAME=VALUE"):
        mpirun_argv(plan, "x.rf", ["t"], export=["NCCL_DEBUG=IN\nFO"])


def test_cli_bad_node_data_is_one_line_naming_the_node_and_exit_2(tmp_path):
    from conftest import run_cli
    from provision.probe.store import save_host

    save_host(tmp_path / "facts", eight_gpu("a"), {})
    save_host(tmp_path / "facts", dataclasses.replace(eight_gpu("b", "10.0.0.2/24"), openmpi=OpenMPI("4", (), None, "test")), {})
    done = run_cli("launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(tmp_path / "facts"), "--", "t", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "b: OpenMPI version '4' is not MAJOR.MINOR[.PATCH]" in " ".join(done.stderr.split())
    torch = run_cli(
        "launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(tmp_path / "facts"), "--format", "torchrun", "--", "t",
        cwd=tmp_path,
    )  # fmt: skip
    assert torch.returncode == 0, torch.stderr  # torchrun runs no mpirun: OpenMPI's version is not asked
    save_host(tmp_path / "facts", dataclasses.replace(eight_gpu("b"), interfaces=nic("b", address="10.0.0.5/99")), {})
    bad = run_cli(
        "launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(tmp_path / "facts"), "--format", "torchrun", "--", "t",
        cwd=tmp_path,
    )  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert "b: ip-addr lists '10.0.0.5/99', not an IPv4 address with a prefix length" in " ".join(bad.stderr.split())
