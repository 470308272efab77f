"""mpirun command lines, DDL options, hostfiles."""

import dataclasses

import pytest

from plan_support import minsky
from provision.errors import PlanError, UnsafeValueError
from provision.facts.model import NetInterface, OpenMPI
from provision.launch.mpirun import (
    DdlOptions,
    allocation_hostfile,
    check_ddl,
    hostfile,
    mpirun_argv,
    needs_hostfile,
    quoted,
    root_message,
)
from provision.plans.dims import parse_dims
from provision.plans.rankfile import plan_rankfile


def host(name, version="2.0.1", ifaces=("ib0", "enp1s0f2")):
    facts = minsky(name)
    interfaces = tuple(NetInterface(i, True, ("10.0.0.1/24",)) for i in ifaces) + (NetInterface("lo", True, ("127.0.0.1/8",)),)
    return dataclasses.replace(facts, openmpi=OpenMPI(version, ("openmpi-bin",), True, "test"), interfaces=interfaces)


def plan(*hosts, dims="4x2x1"):
    return plan_rankfile(parse_dims(dims), list(hosts))


def test_seed_style_command_with_ddl():
    argv = mpirun_argv(plan(host("a"), host("b")), "4x2.rf", ["caffe", "train", "-gpu", "0"], ddl=DdlOptions("n", 1))
    assert quoted(argv) == (
        "mpirun -n 8 -rf 4x2.rf -x PATH -x LD_LIBRARY_PATH --mca btl_tcp_if_include ib0 "
        "caffe train -gpu 0 -ddl '-mode n:4x2x1 -dev_sync 1'"
    )


def test_openmpi_5_uses_map_by_rankfile_and_the_allocation_hostfile():
    p = plan(host("a", "5.0.7"), host("b", "5.0.7"))
    assert needs_hostfile(p)
    argv = mpirun_argv(p, "x.rf", ["true"], export=["PYTHONPATH"], hostfile_path="x.hosts")
    assert argv[3:7] == ["--map-by", "rankfile:file=x.rf", "--hostfile", "x.hosts"] and argv.count("-x") == 3
    assert allocation_hostfile(p, "x.rf").splitlines()[1:] == ["a slots=4", "b slots=4"]
    assert allocation_hostfile(p, "x.rf").startswith("# provision: the hosts and slots of x.rf")
    # Without the allocation PRRTE refuses the rank file's hosts ("either not allocated or oversubscribed").
    with pytest.raises(PlanError, match="OpenMPI 5.0 maps a rank file only onto allocated hosts"):
        mpirun_argv(p, "x.rf", ["true"])


def test_openmpi_4_takes_the_hosts_from_the_rank_file():
    p = plan(host("a", "4.1.4"), host("b", "4.1.4"))
    assert not needs_hostfile(p)
    assert mpirun_argv(p, "x.rf", ["true"])[:5] == ["mpirun", "-n", "8", "-rf", "x.rf"]


def test_allow_run_as_root_only_when_asked():
    p = plan(host("a", "5.0.7"), host("b", "5.0.7"))
    assert "--allow-run-as-root" not in mpirun_argv(p, "x.rf", ["true"], hostfile_path="h")
    argv = mpirun_argv(p, "x.rf", ["true"], hostfile_path="h", allow_run_as_root=True)
    assert argv[argv.index("--allow-run-as-root") + 1 :] == [
        "-x",
        "PATH",
        "-x",
        "LD_LIBRARY_PATH",
        "--mca",
        "btl_tcp_if_include",
        "ib0",
        "true",
    ]
    assert "--allow-run-as-root" in mpirun_argv(
        plan(host("a", "4.1.4"), host("b", "4.1.4")), "x.rf", ["true"], allow_run_as_root=True
    )
    assert root_message("n1", "root").startswith("n1: mpirun would run as root (login user root); OpenMPI refuses")


def test_mixed_versions_name_each_version_and_its_hosts():
    with pytest.raises(PlanError) as refused:
        mpirun_argv(
            plan(host("a", "4.1.4"), host("b", "5.0.7"), host("c", "4.1.4"), host("d", "5.0.7"), dims="4x4x1"), "x", ["true"]
        )
    assert (
        str(refused.value)
        == "OpenMPI versions differ across hosts (4.1.4 on a, c; 5.0.7 on b, d): mpirun needs the same everywhere"
    )
    many = [host(f"h{i}", "4.1.4" if i else "5.0.3") for i in range(20)]
    with pytest.raises(PlanError, match=r"4.1.4 on h1, h2, h3, h4, h5, h6, h7, h8 and 11 more; 5.0.3 on h0\)"):
        mpirun_argv(plan(*many, dims="4x20x1"), "x", ["true"])


def test_refusals():
    with pytest.raises(PlanError, match="versions differ"):
        mpirun_argv(plan(host("a", "4.1.4"), host("b", "2.0.1")), "x", ["true"])
    missing = dataclasses.replace(host("b"), openmpi=OpenMPI(None, (), None, "none"))
    with pytest.raises(PlanError, match="not installed on: b"):
        mpirun_argv(plan(host("a"), missing), "x", ["true"])
    with pytest.raises(UnsafeValueError):
        mpirun_argv(plan(host("a"), host("b")), "x", ["true"], export=["A;rm"])
    with pytest.raises(PlanError, match="not up on: b"):
        mpirun_argv(plan(host("a"), host("b", ifaces=("eth0",))), "x", ["true"], iface="ib0")


def test_ddl_checks():
    dims = parse_dims("4x2x3")
    with pytest.raises(PlanError, match="invalid dim size"):
        check_ddl(DdlOptions("b"), 12, dims)
    with pytest.raises(PlanError, match="one of"):
        check_ddl(DdlOptions("z"), 24, dims)
    assert DdlOptions("p", None, 100).text(dims) == "-mode p:4x2x3 -dump_iter 100"


def test_hostfiles():
    p = plan(host("a"), host("b"))
    assert hostfile(p) == "a slots=4\nb slots=4\n"


def test_exports_once_each_in_order():
    argv = mpirun_argv(plan(host("a"), host("b")), "x.rf", ["true"], export=["PYTHONPATH", "PATH", "PYTHONPATH", "NCCL_DEBUG"])
    exported = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"]
    assert exported == ["PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "NCCL_DEBUG"]


@pytest.fixture
def v5_facts(tmp_path):
    """The Minsky's replayed facts, with OpenMPI 5.0.7 as trixie's nodes report it."""
    import json

    from conftest import run_cli

    facts_dir = tmp_path / "facts"
    assert run_cli("probe", "--replay", "tests/fixtures/captures", "minsky", "--facts-dir", str(facts_dir)).returncode == 0
    path = facts_dir / "minsky.json"
    data = json.loads(path.read_text())
    data["openmpi"]["version"] = "5.0.7"
    path.write_text(json.dumps(data))
    return facts_dir


def test_cli_openmpi_5_writes_the_hostfile_beside_the_rank_file(v5_facts, tmp_path):
    from conftest import run_cli

    rf = tmp_path / "job.rf"
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("hosts:\n  minsky: {user: mpi}\n")
    done = run_cli(
        "launch",
        "2x1x1",
        "--hosts",
        "minsky",
        "-i",
        str(inventory),
        "--facts-dir",
        str(v5_facts),
        "--allow-no-gpu",
        "--rankfile",
        str(rf),
        "--",
        "hostname",
    )
    assert done.returncode == 0, done.stderr
    hosts = tmp_path / "job.hosts"
    assert done.stdout == f"mpirun -n 2 --map-by rankfile:file={rf} --hostfile {hosts} -x PATH -x LD_LIBRARY_PATH hostname\n"
    assert hosts.read_text().splitlines()[1:] == ["minsky slots=2"] and f"wrote hostfile {hosts}" in done.stderr
    assert "run as root" not in done.stderr


def test_cli_root_login_is_said_and_the_switch_is_explicit(v5_facts, tmp_path):
    from conftest import run_cli

    inventory = tmp_path / "hosts.yml"
    inventory.write_text("hosts:\n  minsky: {user: root}\n")
    args = [
        "launch",
        "1x1x1",
        "--hosts",
        "minsky",
        "-i",
        str(inventory),
        "--facts-dir",
        str(v5_facts),
        "--allow-no-gpu",
        "--rankfile",
        str(tmp_path / "r.rf"),
        "--known-hosts",
        str(tmp_path / "kh"),
    ]
    done = run_cli(*args, "--", "hostname")
    assert done.returncode == 0 and "--allow-run-as-root" not in done.stdout
    assert (
        "warning: minsky: mpirun would run as root (login user root); OpenMPI refuses to run as root unless told: pass --allow-run-as-root"  # noqa: E501 - one literal, kept whole to be read or grepped
        in " ".join(done.stderr.split())
    )
    done = run_cli(*args, "--allow-run-as-root", "--", "hostname")
    assert done.returncode == 0 and "r.hosts --allow-run-as-root -x PATH" in done.stdout and "warning" not in done.stderr


def test_default_exports_that_are_unset_are_left_out_but_asked_ones_kept():
    the_plan = plan(host("a"), host("b"))
    argv = mpirun_argv(
        the_plan, "x.rf", ["hostname"], export=["NCCL_DEBUG"], unset_env=frozenset({"LD_LIBRARY_PATH", "NCCL_DEBUG"})
    )
    assert "LD_LIBRARY_PATH" not in argv and argv[argv.index("PATH") - 1] == "-x"
    assert argv[argv.index("NCCL_DEBUG") - 1] == "-x"  # the user named it: passed anyway
    assert "LD_LIBRARY_PATH" in mpirun_argv(the_plan, "x.rf", ["hostname"])  # printed commands keep the seed's form
