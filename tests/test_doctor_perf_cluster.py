"""`provision doctor --perf` with real iperf3 between sshd containers (tests/cluster/perf-compose.yml).

Each fault is real traffic shaping on this kernel (the containers have NET_ADMIN): tc tbf on one
node's eth0 makes a bad node; an htb class with a u32 ``match ip dst`` filter makes one node slow
towards one peer only, a bad link; iptables REJECT on the test port is a firewall. doctor must
name exactly that node, exactly that pair, and pass the healthy cluster.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from cluster_support import TESTS_DIR, Cluster, compose_cluster, ensure_docker
from conftest import run_cli

COMPOSE = TESTS_DIR / "cluster" / "perf-compose.yml"
ENSURE_PERF_IMAGE = TESTS_DIR / "cluster" / "ensure-perf-image.sh"
NODES = ("p1", "p2", "p3", "p4", "p5")
CHECK = "perf tcp eth0"
pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def perf_cluster(tmp_path_factory):
    ensure_docker()
    subprocess.run(["bash", str(ENSURE_PERF_IMAGE)], check=True)
    material = tmp_path_factory.mktemp("perf")
    with compose_cluster(COMPOSE, "PERF_DIR", f"provperf{os.getpid()}", material, NODES) as cluster:
        inventory = material / "hosts.yml"
        inventory.write_text(cluster.inventory_yaml(NODES))
        yield cluster, inventory, material / "known_hosts"


def _address(cluster: Cluster, node: str) -> str:
    return cluster.docker_exec(node, "sh", "-c", "ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1").strip()


def _doctor(cluster_bits, *args: str) -> tuple[int, dict[str, dict], dict]:
    _, inventory, known = cluster_bits
    done = run_cli("doctor", "-i", str(inventory), "--known-hosts", str(known), "--json", "--timings", "--perf", *args)
    assert done.stdout.strip(), done.stderr
    timings = next(json.loads(line) for line in done.stderr.splitlines() if line.startswith('{"doctor_timings"'))
    return done.returncode, {c["name"]: c for c in json.loads(done.stdout)["checks"]}, timings["doctor_timings"]


def test_a_healthy_cluster_passes_every_pair(perf_cluster):
    code, checks, timings = _doctor(perf_cluster)
    perf = checks[CHECK]
    assert perf["status"] == "pass", perf
    assert perf["hosts"] == []
    assert "covered 10 of 10 pairs in 5 of 5 rounds" in perf["detail"], perf
    assert "slow below 50% of it" in perf["detail"] and "latency" in perf["detail"]
    assert "perf nodes" not in checks
    assert timings["perf"] == {
        "pairs_total": 10,
        "pairs_tested": 10,
        "pairs_measured": 10,
        "rounds_run": 5,
        "rounds_planned": 5,
        "nodes_left_out": 0,
    }
    assert [name for name, c in checks.items() if c["status"] == "fail"] == []
    assert code == 0


def test_a_node_throttled_on_eth0_is_the_bad_node(perf_cluster):
    cluster = perf_cluster[0]
    cluster.docker_exec(
        "p3", "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "32kbit", "latency", "50ms"
    )
    try:
        code, checks, _ = _doctor(perf_cluster)
    finally:
        cluster.docker_exec("p3", "tc", "qdisc", "del", "dev", "eth0", "root")
    perf = checks[CHECK]
    assert perf["status"] == "fail" and perf["hosts"] == ["p3"], perf
    assert "bad node p3: slow with 4 of 4 peers" in perf["detail"], perf
    assert "bad link" not in perf["detail"] and "slow link" not in perf["detail"]
    assert code == 1


def test_a_node_throttled_towards_one_peer_is_the_bad_link(perf_cluster):
    cluster = perf_cluster[0]
    peer = _address(cluster, "p4")
    shaping = [
        "tc qdisc add dev eth0 root handle 1: htb default 10",
        "tc class add dev eth0 parent 1: classid 1:10 htb rate 10gbit",
        "tc class add dev eth0 parent 1: classid 1:20 htb rate 100mbit ceil 100mbit",
        f"tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst {peer}/32 flowid 1:20",
    ]
    cluster.docker_exec("p2", "sh", "-ec", "; ".join(shaping))
    try:
        code, checks, _ = _doctor(perf_cluster)
    finally:
        cluster.docker_exec("p2", "tc", "qdisc", "del", "dev", "eth0", "root")
    perf = checks[CHECK]
    assert perf["status"] == "fail" and sorted(perf["hosts"]) == ["p2", "p4"], perf
    assert "bad link p2-p4" in perf["detail"] or "bad link p4-p2" in perf["detail"], perf
    assert "both nodes are fine with their other peers" in perf["detail"]
    assert "bad node" not in perf["detail"]
    assert code == 1


def test_a_node_without_iperf3_is_named_with_the_package_and_the_rest_are_tested(perf_cluster):
    cluster = perf_cluster[0]
    cluster.docker_exec("p5", "mv", "/usr/bin/iperf3", "/usr/bin/iperf3.away")
    try:
        code, checks, _ = _doctor(perf_cluster)
    finally:
        cluster.docker_exec("p5", "mv", "/usr/bin/iperf3.away", "/usr/bin/iperf3")
    nodes = checks["perf nodes"]
    assert nodes["status"] == "fail" and nodes["hosts"] == ["p5"], nodes
    assert "no iperf3 on PATH" in nodes["detail"] and "apt-get install iperf3" in nodes["detail"]
    assert checks[CHECK]["status"] == "pass" and "covered 6 of 6 pairs" in checks[CHECK]["detail"], checks[CHECK]
    assert code == 1


def test_a_peer_that_refuses_the_test_port_is_named(perf_cluster):
    cluster = perf_cluster[0]
    rule = ["INPUT", "-p", "tcp", "--dport", "47201", "-j", "REJECT", "--reject-with", "tcp-reset"]
    cluster.docker_exec("p1", "iptables", "-A", *rule)
    try:
        code, checks, timings = _doctor(perf_cluster, "--budget", "120s")
    finally:
        cluster.docker_exec("p1", "iptables", "-D", *rule)
    perf = checks[CHECK]
    assert perf["status"] == "fail" and "p1" in perf["hosts"], perf
    assert "p1 refused the test port 47201" in perf["detail"], perf
    # every pair is still accounted for: the refused ones failed, the others were measured
    assert timings["perf"]["pairs_tested"] == 10 and 0 < timings["perf"]["pairs_measured"] < 10, timings
    assert code == 1


def test_rounds_and_budget_say_what_they_covered(perf_cluster):
    _, checks, timings = _doctor(perf_cluster, "--rounds", "2")
    perf = timings["perf"]
    assert perf["rounds_planned"] == 2 and perf["rounds_run"] == 2 and perf["pairs_total"] == 10
    assert 2 <= perf["pairs_tested"] <= 4  # two matchings of 2 pairs each, maybe the same pair twice
    assert f"covered {perf['pairs_tested']} of 10 pairs in 2 of 2 rounds" in checks[CHECK]["detail"]
    _, checks, timings = _doctor(perf_cluster, "--budget", "4s")
    perf = timings["perf"]
    assert perf["pairs_tested"] == 2 * perf["rounds_run"] and perf["rounds_planned"] == 5, perf
    assert f"covered {perf['pairs_tested']} of 10 pairs in {perf['rounds_run']} of 5 rounds (budget 4s" in checks[CHECK]["detail"]


def _racked_inventory(cluster: Cluster, inventory: Path) -> Path:
    """The perf cluster's inventory with racks r1: p1-p3, r2: p4-p5."""
    racked = inventory.with_name("racked.yml")
    racks = "racks:\n  - {name: r1, hosts: [p1, p2, p3]}\n  - {name: r2, hosts: [p4, p5]}\n"
    racked.write_text(cluster.inventory_yaml(NODES) + racks)
    return racked


def _launch(cluster_bits, tmp_path: Path, *args: str):
    cluster, inventory, known = cluster_bits
    racked = _racked_inventory(cluster, inventory)
    rankfile = tmp_path / "job.rf"
    done = run_cli(
        "launch", "1x2x2", "-i", str(racked), "--known-hosts", str(known), "--probe", "--facts-dir", str(tmp_path / "facts"),
        "--allow-no-gpu", "--rankfile", str(rankfile), *args, "--", "hostname",
    )  # fmt: skip
    return done, rankfile


def test_launch_fills_the_shape_around_a_bad_node_rack_by_rack(perf_cluster, tmp_path):
    cluster = perf_cluster[0]
    cluster.docker_exec(
        "p1", "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "32kbit", "latency", "50ms"
    )
    try:
        done, rankfile = _launch(perf_cluster, tmp_path, "--pick-healthy", "--perf")
    finally:
        cluster.docker_exec("p1", "tc", "qdisc", "del", "dev", "eth0", "root")
    assert done.returncode == 0, done.stderr
    assert "provision: left out p1: perf: bad node: slow with 4 of 4 peers" in done.stderr, done.stderr
    hosts = [line.split()[1].split("=")[1] for line in rankfile.read_text().splitlines() if line.startswith("rank ")]
    assert hosts == ["p2", "p3", "p4", "p5"], rankfile.read_text()


def test_launch_with_too_few_healthy_hosts_is_one_line_and_exit_1(perf_cluster, tmp_path):
    cluster = perf_cluster[0]
    cluster.docker_exec("p5", "mv", "/usr/bin/iperf3", "/usr/bin/iperf3.away")
    try:
        done, rankfile = _launch(perf_cluster, tmp_path, "--perf")
    finally:
        cluster.docker_exec("p5", "mv", "/usr/bin/iperf3.away", "/usr/bin/iperf3")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("provision: error: not launched: dims 1x2x2 need 2 racks of 2 healthy hosts; "), done.stderr
    assert "only 1 of the inventory's racks have them; at fault: p5 (perf nodes: not tested: p5: no iperf3 on PATH" in last
    assert not rankfile.exists()


def test_a_test_that_hangs_is_named_and_bounded_by_the_budget(perf_cluster):
    """p4's traffic to its peers crawls at 8 kbit/s (htb, queued, not dropped: its SSH to the
    controller stays fast): iperf3 stalls past its length, and doctor stops it and names the pair."""
    cluster = perf_cluster[0]
    shaping = [
        "tc qdisc add dev eth0 root handle 1: htb default 10",
        "tc class add dev eth0 parent 1: classid 1:10 htb rate 10gbit",
        "tc class add dev eth0 parent 1: classid 1:20 htb rate 8kbit ceil 8kbit",
    ]
    shaping += [
        f"tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst {_address(cluster, peer)}/32 flowid 1:20"
        for peer in NODES
        if peer != "p4"
    ]
    cluster.docker_exec("p4", "sh", "-ec", "; ".join(shaping))
    try:
        code, checks, timings = _doctor(perf_cluster, "--budget", "40s")
    finally:
        cluster.docker_exec("p4", "tc", "qdisc", "del", "dev", "eth0", "root")
    perf = checks[CHECK]
    assert perf["status"] == "fail" and "p4" in perf["hosts"], perf
    assert "the test hung: stopped after" in perf["detail"] or "the test did not finish" in perf["detail"], perf
    assert "(budget 40s" in perf["detail"]
    assert timings["perf"]["pairs_measured"] < timings["perf"]["pairs_tested"], timings
    assert code == 1


REUSEPORT_SERVER = (
    "import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1); s.bind(('0.0.0.0', 47201)); s.listen(8); "
    "open('/tmp/squat.log', 'w').close()\n"
    "while True:\n    c, a = s.accept(); open('/tmp/squat.log', 'a').write(f'Accepted connection from {a}\\n'); c.close()"
)


def test_a_users_server_on_the_test_port_fails_every_test_named_and_serves_none(perf_cluster):
    """Issue 33 finding 5: user nobody listens on the test port first on every node (her iperf3
    server on p1-p4, a Python listener with SO_REUSEADDR and SO_REUSEPORT on p5). Every pair's
    test fails, named, with the reason; doctor's client never connects to her servers (their logs
    show no connection) and no figure is reported."""
    cluster = perf_cluster[0]
    for node in NODES[:4]:
        cluster.docker_exec(node, "iperf3", "-s", "-p", "47201", "-D", "--logfile", "/tmp/squat.log", user="nobody")
    reuseport = ["python3", "-c", REUSEPORT_SERVER]
    subprocess.run(["docker", "exec", "-d", "-u", "nobody", cluster.container("p5"), *reuseport], check=True)
    try:
        for node in NODES:  # each squatter listens before doctor starts
            for _ in range(100):
                if ":B861 00000000:0000 0A" in cluster.docker_exec(node, "cat", "/proc/net/tcp", "/proc/net/tcp6"):
                    break
                time.sleep(0.1)
        code, checks, timings = _doctor(perf_cluster, "--budget", "120s")
        logs = {node: cluster.docker_exec(node, "cat", "/tmp/squat.log") for node in NODES}
    finally:
        for node in NODES:
            subprocess.run(["docker", "exec", cluster.container(node), "pkill", "-u", "nobody"], check=False)
    perf = checks[CHECK]
    assert code == 1 and perf["status"] == "fail" and sorted(perf["hosts"]) == list(NODES), perf
    assert timings["perf"]["pairs_tested"] == 10 and timings["perf"]["pairs_measured"] == 0, timings
    said = re.findall(
        r"(p\d)-(p\d): the test server on (p\d) did not start: error - unable to start listener for connections: "
        r"Address already in use \(another process holds port 47201 on ([\d.]+)\) \(exit 1\)",
        perf["detail"],
    )
    assert len(said) == 6 and "; and 4 more" in perf["detail"], perf["detail"]  # the first six of the ten, then a count
    assert all(server == named and address == _address(cluster, server) for _, server, named, address in said), said
    assert all("Accepted connection" not in log for log in logs.values()), logs  # no client ever reached her servers
