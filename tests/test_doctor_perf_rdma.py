"""doctor --perf over RDMA (provision.doctor.perf_rdma): ``ib_write_bw`` per rail on the TCP rounds'
matchings. No machine of this project has an RDMA device, so the commands cannot run here: they are
pinned to perftest's documented options (linux-rdma/perftest README, section 5 "Running Tests":
"Server: ./<test name> <options>", "Client: ./<test name> <options> <server IP address>", "The SAME
OPTIONS must be passed to both server and client"; ``-d/--ib-dev``, ``-i/--ib-port``, ``-p/--port``,
``-D/--duration``, ``-F/--CPU-freq``, ``-x/--gid-index``, ``--report_gbits``), and the sessions are
stand-ins that answer with a real published ``ib_write_bw`` report (tests/fixtures/SOURCES.md:
linux-rdma/perftest#273) with its figure set per link."""

from __future__ import annotations

import dataclasses
import re

from conftest import read_fixture
from plan_support import minsky
from provision.doctor.model import FAIL, PASS, WARN, NodeReport
from provision.doctor.perf import PerfSettings, run_perf
from provision.doctor.perf_judge import Link
from provision.doctor.perf_rdma import (
    NO_PORT,
    NodeRail,
    RdmaPairs,
    RdmaRun,
    node_rails,
    rdma_client_command,
    rdma_preflight,
    rdma_server_command,
    shared_rails,
    write_bw_options,
)
from provision.facts.model import NetInterface, RdmaDevice, RdmaGid, RdmaPort
from provision.inventory.model import Host
from provision.plans.rails import Rail
from provision.transport.options import CommandResult

IB = RdmaPort(1, "ACTIVE", "LinkUp", "InfiniBand", "200 Gb/sec (4X HDR)")
REPORT = read_fixture("outputs", "perftest", "ib_write_bw-postlist-gbits.txt")  # BW average 0.48 Gb/sec
LATENCY = read_fixture("outputs", "perftest", "ib_read_lat-mlx4.txt")  # perftest's _lat table: t_typical 1.79 usec


def report(gbps: float) -> str:
    """The published report with its average set to ``gbps`` (the table as perftest prints it)."""
    return REPORT.replace("0.48", f"{gbps:.2f}")


def facts(name, address, devices=(), ports=None):
    """A node with ``eth0`` at ``address`` and the given RDMA devices (port 1 each, ACTIVE unless told)."""
    rdma = tuple(RdmaDevice(device, None, None, ((ports or {}).get(device, IB),)) for device in devices)
    interfaces = (NetInterface("eth0", True, (f"{address}/24",)), NetInterface("lo", True, ("127.0.0.1/8",)))
    return dataclasses.replace(minsky(name), interfaces=interfaces, rdma=rdma, gpus=())  # no GPU: no all-reduce here


def test_a_nodes_rails_are_its_active_ports_by_device_port_with_the_roce_gid_index():
    roce = RdmaPort(
        1,
        "ACTIVE",
        "LinkUp",
        "Ethernet",
        "100 Gb/sec",
        (RdmaGid(3, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2", "ens1"),),
    )
    down = dataclasses.replace(IB, state="DOWN")
    found = node_rails(facts("a", "10.0.0.1", ("mlx5_10", "mlx5_2", "mlx5_1", "mlx5_3"), {"mlx5_1": down, "mlx5_3": roce}))
    assert list(found) == ["mlx5_2:1", "mlx5_3:1", "mlx5_10:1"]  # natural order; the DOWN port is no rail
    assert found["mlx5_3:1"].gid_index == 3 and found["mlx5_2:1"].gid_index is None
    assert node_rails(facts("b", "10.0.0.2")) == {} and node_rails(None) == {}


def test_a_pair_is_tested_on_the_ports_both_ends_have_under_the_same_name():
    a = node_rails(facts("a", "10.0.0.1", ("mlx5_0", "mlx5_1", "mlx5_2")))
    b = node_rails(facts("b", "10.0.0.2", ("mlx5_1", "mlx5_0", "mlx5_3")))
    assert shared_rails(a, b) == ["mlx5_0:1", "mlx5_1:1"]


def test_the_commands_are_perftests_documented_server_and_client():
    rail = Rail("mlx5_0", 1, "InfiniBand", None)
    assert write_bw_options(rail, None, 47201, 3) == "-d mlx5_0 -i 1 -p 47201 -D 3 --report_gbits -F"
    assert write_bw_options(rail, 3, 47201, 3).endswith(" -F -x 3")  # RoCE: the port's RoCE v2 GID
    server = rdma_server_command("-d mlx5_0 -i 1 -p 47201 -D 3 --report_gbits -F", 47201, 13)
    assert '( ib_write_bw -d mlx5_0 -i 1 -p 47201 -D 3 --report_gbits -F >"$d/out" 2>&1' in server  # no host: the server
    assert "( sleep 13; " in server and "/:B861$/" in server  # its life bounded; proven the listener of port 47201
    client = rdma_client_command("-d mlx5_0 -i 1 -p 47201 -D 3 --report_gbits -F", "10.0.0.2", 3)
    assert "timeout -k 1 15 ib_write_bw -d mlx5_0 -i 1 -p 47201 -D 3 --report_gbits -F 10.0.0.2 2>&1" in client
    assert "Couldn't connect" not in client and "head -c 262144" in client  # once: the server listens already; capped
    odd = write_bw_options(Rail("mlx5_0;reboot", 1, None, None), None, 47201, 3)
    assert odd.startswith("-d 'mlx5_0;reboot' ")  # a node's device name is quoted, never run


class _Node:
    """A stand-in session: answers each command by what it is (preflights, servers, clients)."""

    def __init__(self, rdma_answers=None, has_perftest=True, iperf3_json=""):
        self.rdma_answers = dict(rdma_answers or {})  # device -> client answer
        self.has_perftest, self.iperf3_json, self.commands = has_perftest, iperf3_json, []

    def run(self, command, stdin, timeout=None):
        self.commands.append(command)
        if "mktemp -d /tmp/provision-perf." in command:  # a server (perftest's or iperf3's) started: it listens
            return CommandResult("@listening /tmp/provision-perf.AbCdE12345\n", "", 0)
        if command.startswith("d=/tmp/provision-perf."):  # ... and served its client (iperf3's: that cookie)
            return CommandResult("@rc 0\n" + (self.iperf3_json if "iperf3" in self.commands[-2] else ""), "", 0)
        if command.startswith("command -v ib_write_bw"):
            return CommandResult("ib_write_bw present\n" if self.has_perftest else "ib_write_bw missing\n", "", 0)
        if command.startswith("v=$(iperf3"):
            return CommandResult("iperf3 iperf 3.12 (cJSON 1.7.15)\n", "", 0)
        if "iperf3 -c" in command:
            return CommandResult(self.iperf3_json, "", 0)
        if "ib_write_lat" in command and command.startswith("out=$("):  # the latency client
            return getattr(self, "latency", CommandResult(LATENCY, "", 0))
        if "ib_write_bw" in command and command.startswith("out=$("):  # the client
            device = re.search(r"-d (\S+)", command).group(1)
            answer = self.rdma_answers[device]
            return answer if isinstance(answer, CommandResult) else CommandResult(report(answer), "", 0)
        raise AssertionError(f"a command the stand-in does not know: {command[:80]}")

    def close(self):
        pass


def _rails(*devices):
    return {f"{d}:1": NodeRail(Rail(d, 1, "InfiniBand", IB.rate), None) for d in devices}


def test_each_shared_rail_is_one_link_of_its_own_kind_and_bad_output_fails_that_rail_only():
    sessions = {"a": _Node({"mlx5_0": 96.5, "mlx5_1": CommandResult("Segmentation fault\n", "", 139)}), "b": _Node()}
    rails = {"a": _rails("mlx5_0", "mlx5_1", "mlx5_4"), "b": _rails("mlx5_0", "mlx5_1")}
    links = RdmaPairs(sessions, {"a": "10.0.0.1", "b": "10.0.0.2"}, rails, 47201).run(("a", "b"), 3, 20.0)
    assert [(link.kind, link.gbps) for link in links] == [("rdma mlx5_0:1", 96.5), ("rdma mlx5_1:1", None)]
    assert links[1].error.startswith("ib_write_bw's output on a does not parse: cannot parse `ib_write_bw` output")
    assert links[1].error.endswith("(Segmentation fault)")
    assert links[0].latency_us == 1.79  # ib_write_lat's typical latency, where the bandwidth test passed
    clients = [c for c in sessions["a"].commands if c.startswith("out=$(") and "ib_write_bw" in c]
    servers = [c for c in sessions["b"].commands if "ib_write_bw" in c]
    assert [re.search(r"ib_write_lat (.*?) 2>&1", c).group(1) for c in sessions["a"].commands if "ib_write_lat" in c] == [
        "-d mlx5_0 -i 1 -p 47201 -F 10.0.0.2"
    ]
    assert [re.search(r"\( ib_write_lat (.*?) >", c).group(1) for c in sessions["b"].commands if "ib_write_lat" in c] == [
        "-d mlx5_0 -i 1 -p 47201 -F"
    ]
    assert [re.search(r"ib_write_bw (.*?) 2>&1", c).group(1) for c in clients] == [
        "-d mlx5_0 -i 1 -p 47201 -D 3 --report_gbits -F 10.0.0.2",
        "-d mlx5_1 -i 1 -p 47201 -D 3 --report_gbits -F 10.0.0.2",
    ]
    assert [re.search(r"\( ib_write_bw (.*?) >", c).group(1) for c in servers if "mktemp" in c] == [
        "-d mlx5_0 -i 1 -p 47201 -D 3 --report_gbits -F",
        "-d mlx5_1 -i 1 -p 47201 -D 3 --report_gbits -F",
    ]


def test_a_hung_client_is_named():
    sessions = {"a": _Node({"mlx5_0": CommandResult("", "", 124)}), "b": _Node()}
    rails = {"a": _rails("mlx5_0"), "b": _rails("mlx5_0")}
    (link,) = RdmaPairs(sessions, {"a": "10.0.0.1", "b": "10.0.0.2"}, rails, 47201).run(("a", "b"), 3, 20.0)
    assert link.gbps is None and link.error == "the test hung: stopped after 15s"


def test_links_are_judged_per_rail_against_the_median_of_that_rail():
    nodes = ["n1", "n2", "n3", "n4"]
    pairs = [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]
    links = [Link("rdma mlx5_0:1", a, b, 96.0) for a, b in pairs]
    links += [Link("rdma mlx5_1:1", a, b, 20.0 if (a, b) == ("n1", "n2") else 95.0) for a, b in pairs]
    run = RdmaRun(links, {}, {n: _rails("mlx5_0", "mlx5_1") for n in nodes}, 3, 3, None)
    first, second = run.results()
    assert (first.name, first.status) == ("perf rdma mlx5_0:1", PASS)
    assert first.detail.startswith("median 96 Gbit/s over 6 links; slow below 50% of it (48 Gbit/s)")
    assert (second.name, second.status, second.hosts) == ("perf rdma mlx5_1:1", FAIL, ("n1", "n2"))
    assert second.detail.startswith(
        "bad link n1-n2: 20 Gbit/s (one direction measured); both nodes are fine with their other peers"
    )
    assert "covered 6 of 6 pairs in 3 of 3 rounds" in second.detail


def test_a_node_with_ports_but_no_ib_write_bw_is_said_with_the_package():
    sessions = {"a": _Node(has_perftest=False), "b": _Node(), "c": _Node()}
    rails = {"a": _rails("mlx5_0"), "b": _rails("mlx5_0"), "c": {}}
    ready, missing = rdma_preflight(sessions, rails)
    assert list(ready) == ["b"] and missing == {"a": "mlx5_0:1"}
    assert [c for c in sessions["c"].commands] == []  # no port: not asked
    (check,) = RdmaRun([], missing, ready).results()
    assert (check.name, check.status, check.hosts) == ("perf rdma", FAIL, ("a",))
    assert check.detail == (
        "no ib_write_bw on PATH on nodes with active RDMA ports: a (ports mlx5_0:1): "
        "install perftest (Debian/Ubuntu: apt-get install perftest; RHEL/Rocky: dnf install perftest)"
    )


def test_ports_but_no_pair_sharing_one_is_said():
    (check,) = RdmaRun([], {}, {"a": _rails("mlx5_0"), "b": _rails("mlx5_1")}).results()
    assert check.status == WARN and check.detail.startswith("no pair of nodes shares an active RDMA port")


IPERF3 = read_fixture("outputs", "iperf3", "bidir.json")


def _run(node_facts, answers, missing=()):
    hosts = [Host(f.host) for f in node_facts]
    reports = [NodeReport(f.host, facts=f) for f in node_facts]
    sessions = {f.host: _Node(answers.get(f.host), f.host not in missing, IPERF3) for f in node_facts}
    run = run_perf(hosts, reports, PerfSettings(seconds=1, seed=1), lambda host: sessions[host.name])
    return run, sessions


def test_run_perf_tests_every_pair_over_tcp_and_each_rail():
    nodes = [facts(f"n{i}", f"10.0.0.{i}", ("mlx5_0", "mlx5_1")) for i in range(1, 5)]
    answers = {f"n{i}": {"mlx5_0": 96.0, "mlx5_1": 95.0} for i in range(1, 5)}
    run, sessions = _run(nodes, answers)
    checks = {check.name: check for check in run.results(4)}
    assert list(checks) == ["perf tcp eth0", "perf rdma mlx5_0:1", "perf rdma mlx5_1:1"]
    assert checks["perf rdma mlx5_0:1"].status == PASS and "over 6 links" in checks["perf rdma mlx5_0:1"].detail
    assert "latency (ib_write_lat, typical one-way) median 1.79 us, highest 1.79 us" in checks["perf rdma mlx5_1:1"].detail
    assert NO_PORT not in checks["perf tcp eth0"].detail
    clients = [c for s in sessions.values() for c in s.commands if c.startswith("out=$(")]
    assert sum("ib_write_bw" in c for c in clients) == 12 and sum("ib_write_lat" in c for c in clients) == 12  # 6 pairs x 2 rails


def test_run_perf_without_active_ports_adds_one_line_and_no_rdma_command():
    down = dataclasses.replace(IB, state="DOWN")
    nodes = [facts(f"n{i}", f"10.0.0.{i}", ("mlx5_0",), {"mlx5_0": down}) for i in range(1, 4)]
    run, sessions = _run(nodes, {})
    (check,) = run.results(3)
    assert check.name == "perf tcp eth0" and check.detail.endswith("; " + NO_PORT)
    assert not any("ib_write_bw" in c for s in sessions.values() for c in s.commands)


def test_run_perf_leaves_a_node_without_perftest_out_of_rdma_only():
    nodes = [facts(f"n{i}", f"10.0.0.{i}", ("mlx5_0",)) for i in range(1, 5)]
    answers = {f"n{i}": {"mlx5_0": 96.0} for i in range(1, 5)}
    run, _ = _run(nodes, answers, missing=("n4",))
    checks = {check.name: check for check in run.results(4)}
    assert checks["perf tcp eth0"].status == PASS and "covered 6 of 6 pairs" in checks["perf tcp eth0"].detail
    assert "over 3 links" in checks["perf rdma mlx5_0:1"].detail  # n1-n3 only
    assert checks["perf rdma"].status == FAIL and checks["perf rdma"].hosts == ("n4",)


def test_a_latency_test_that_fails_leaves_the_bandwidth_figure_standing_without_a_latency():
    client = _Node({"mlx5_0": 96.5})
    client.latency = CommandResult("Couldn't connect to 10.0.0.2:47201\n", "", 1)
    rails = {"a": _rails("mlx5_0"), "b": _rails("mlx5_0")}
    (link,) = RdmaPairs({"a": client, "b": _Node()}, {"a": "10.0.0.1", "b": "10.0.0.2"}, rails, 47201).run(("a", "b"), 3, 20.0)
    assert (link.gbps, link.latency_us, link.error) == (96.5, None, "")


def test_a_server_that_did_not_start_fails_the_rail_named_and_no_client_runs():
    """Issue 33 finding 5 over RDMA: another user held the out-of-band port first."""
    taken = _Node()
    taken.run = lambda command, stdin, timeout=None: CommandResult(
        "@failed exit 1\n Couldn't bind to port 47201: Address already in use\n", "", 1
    )
    client = _Node({"mlx5_0": 96.5})
    rails = {"a": _rails("mlx5_0"), "b": _rails("mlx5_0")}
    (link,) = RdmaPairs({"a": client, "b": taken}, {"a": "10.0.0.1", "b": "10.0.0.2"}, rails, 47201).run(("a", "b"), 3, 20.0)
    assert link.gbps is None
    assert link.error == "the test server on b did not start: Couldn't bind to port 47201: Address already in use (exit 1)"
    assert client.commands == []
