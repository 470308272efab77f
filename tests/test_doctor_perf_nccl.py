"""doctor --perf's nccl-tests all-reduce (provision.doctor.perf_nccl). No machine of this project has
a GPU, so ``all_reduce_perf`` cannot run here: the command is pinned to NVIDIA/nccl-tests' README
("Usage": MPI starts the processes, ranks = processes x threads x GPUs per thread; ``-b 8 -e 128M
-f 2 -g 4`` under mpirun), started by the launch plan's own mpirun line, and the first host is a
stand-in session answering with a real published report (tests/fixtures/SOURCES.md:
NVIDIA/nccl-tests#252)."""

from __future__ import annotations

import dataclasses
import shlex

from conftest import read_fixture
from plan_support import minsky
from provision.doctor.model import FAIL, PASS, WARN
from provision.doctor.perf_nccl import COMMAND, NAME, all_reduce, all_reduce_job
from provision.facts.model import NetInterface, OpenMPI
from provision.transport.options import CommandResult, HostFailure

REPORT = read_fixture("outputs", "nccl-tests", "all_reduce_perf-ring-5sizes.txt")  # Avg bus bandwidth 95.3009
FINISHED = CommandResult(REPORT, "", 0)


def node(name, address, gpus=4):
    facts = minsky(name, gpus=gpus, gpu_sockets=(0, 0, 1, 1)[:gpus] if gpus else ())
    interfaces = (NetInterface("eth0", True, (f"{address}/24",)), NetInterface("lo", True, ("127.0.0.1/8",)))
    return dataclasses.replace(facts, interfaces=interfaces, openmpi=OpenMPI("4.1.4", ("openmpi-bin",), None, "test"))


class _Node:
    """A stand-in session: the preflight, mktemp, the files written, and mpirun's answer."""

    def __init__(self, answer=FINISHED, has_tool=True):
        self.answer, self.has_tool, self.commands, self.written = answer, has_tool, [], {}

    def run(self, command, stdin, timeout=None):
        self.commands.append(command)
        if command.startswith("command -v all_reduce_perf"):
            return CommandResult("all_reduce_perf present\n" if self.has_tool else "all_reduce_perf missing\n", "", 0)
        if command == "mktemp -d":
            return CommandResult("/tmp/tmp.Ab12\n", "", 0)
        if command.startswith("cat > "):
            self.written[shlex.split(command)[2]] = stdin
            return CommandResult("", "", 0)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def _cluster(count=2, **first):
    facts = {f"n{i}": node(f"n{i}", f"10.0.0.{i}") for i in range(1, count + 1)}
    sessions = {name: _Node(**(first if name == "n1" else {})) for name in facts}
    return list(facts), facts, sessions


def test_the_command_is_nccl_tests_documented_one_rank_per_gpu_sweep():
    assert COMMAND == ("all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "1")


def test_one_run_over_the_planned_rank_file_from_the_first_host_reports_the_bus_bandwidth():
    names, facts, sessions = _cluster()
    check = all_reduce(names, facts, sessions, 120)
    assert (check.name, check.status) == (NAME, PASS)
    assert check.detail.startswith("bus bandwidth 95.3 GB/s (nccl-tests' average over the sizes), 94.9 GB/s at 8589934592 bytes")
    assert "8 ranks on 2 hosts (4x2x1); one run, no peers to compare" in check.detail
    first = sessions["n1"]
    assert set(first.written) == {
        "/tmp/tmp.Ab12/4x2x1.rf",
        "/tmp/tmp.Ab12/4x2x1.nic.sh",
    }  # launch --run's files (OpenMPI 4: no hostfile)
    assert first.written["/tmp/tmp.Ab12/4x2x1.rf"].count("rank ") == 8
    (run,) = [c for c in first.commands if "mpirun" in c]
    expected = shlex.join(all_reduce_job([facts["n1"], facts["n2"]]).argv("/tmp/tmp.Ab12"))
    assert f"cd /tmp/tmp.Ab12 && timeout -k 5 120 {expected} 2>&1" in run and "rm -rf -- /tmp/tmp.Ab12" in run
    assert expected.startswith("mpirun -n 8 ") and expected.endswith(" all_reduce_perf -b 8 -e 1G -f 2 -g 1")
    assert "--mca btl_tcp_if_include eth0" in expected
    assert not any("mpirun" in c for c in sessions["n2"].commands)  # one run, from the first host only


def test_wrong_values_or_a_failed_run_fail_the_check():
    names, facts, sessions = _cluster(answer=CommandResult(REPORT.replace("0 OK", "248 FAILED"), "", 0))
    check = all_reduce(names, facts, sessions)
    assert check.status == FAIL and check.detail == "the all-reduce failed: 248 wrong values" and check.hosts == ("n1", "n2")
    names, facts, sessions = _cluster(answer=CommandResult("ORTE was unable to reliably start one or more daemons.\n", "", 1))
    check = all_reduce(names, facts, sessions)
    assert check.status == FAIL and check.detail.startswith("mpirun exit 1: cannot parse `all_reduce_perf` output")
    assert check.detail.endswith("last line: ORTE was unable to reliably start one or more daemons.")
    names, facts, sessions = _cluster(answer=HostFailure("timeout", "command timed out after 150s"))
    check = all_reduce(names, facts, sessions)
    assert check.status == FAIL and check.detail.startswith("the all-reduce from n1 did not finish: HostFailure")


def test_nodes_without_all_reduce_perf_are_said_and_nothing_runs():
    names, facts, sessions = _cluster(has_tool=False)
    check = all_reduce(names, facts, sessions)
    assert check.status == WARN and check.hosts == ("n1",)
    assert check.detail.startswith("not run: no all_reduce_perf on PATH on n1: build nccl-tests with MPI=1")
    assert not any("mpirun" in c for s in sessions.values() for c in s.commands)


def test_without_gpus_nothing_is_said_and_with_some_it_is_not_run():
    names, facts, sessions = _cluster()
    none = {name: dataclasses.replace(f, gpus=()) for name, f in facts.items()}
    assert all_reduce(names, none, sessions) is None
    assert not any(s.commands for s in sessions.values())
    some = dict(facts, n2=none["n2"])
    check = all_reduce(names, some, sessions)
    assert (check.status, check.hosts, check.detail) == (WARN, ("n2",), "not run: no GPU on n2")
