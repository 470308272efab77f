"""mpirun command lines, DDL options, hostfiles."""

import dataclasses

import pytest

from plan_support import minsky
from provision.errors import PlanError, UnsafeValueError
from provision.facts.model import NetInterface, OpenMPI
from provision.plans.dims import parse_dims
from provision.plans.launch import DdlOptions, check_ddl, common_interface, hostfile, mpirun_argv, quoted
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


def test_openmpi_5_uses_map_by_rankfile():
    argv = mpirun_argv(plan(host("a", "5.0.3"), host("b", "5.0.3")), "x.rf", ["true"], export=["PYTHONPATH"])
    assert argv[3:5] == ["--map-by", "rankfile:file=x.rf"] and argv.count("-x") == 3


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


def test_interface_choice():
    assert common_interface([host("a"), host("b", ifaces=("enp1s0f2",))]) == "enp1s0f2"
    assert common_interface([host("a", ifaces=("eth0",)), host("b", ifaces=("eth1",))]) is None


def test_hostfiles():
    p = plan(host("a"), host("b"))
    assert hostfile(p, "hostfile") == "a slots=4\nb slots=4\n" == hostfile(p, "deepspeed")
    assert hostfile(p, "horovod") == "-H a:4,b:4\n"


def test_exports_once_each_in_order():
    argv = mpirun_argv(plan(host("a"), host("b")), "x.rf", ["true"], export=["PYTHONPATH", "PATH", "PYTHONPATH", "NCCL_DEBUG"])
    exported = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"]
    assert exported == ["PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "NCCL_DEBUG"]
