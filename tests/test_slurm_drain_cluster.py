"""doctor in Slurm's job lifecycle, on a real Slurm cluster: Debian's slurmctld, slurmd and munge
(Slurm 22.05) on ctl and sn1-sn4 (tests/cluster/slurm/drain-compose.yml, image
provision-slurm-drain:test: the Slurm image plus iperf3; NET_ADMIN for tc).

- ``doctor --drain`` (scontrol on ctl, through sudo: Slurm refuses the SSH user ``mpi``): a node
  whose GPU stand-in lost a GPU is drained with ``provision: hardware: ...``; a node an admin
  drained keeps its reason through failing and passing runs; a node doctor cannot reach is
  named and left as it is (not drained blind, not resumed blind); once fixed and reached, the
  node is resumed.
- ``doctor --perf --drain``: a node throttled with tc tbf is drained as a bad node and resumed
  once the shaping is gone; a link throttled with htb + u32 drains neither node and is reported
  with both directions' figures, in the JSON's matrix too.
- The node check (``doctor --node-script``) as slurmd runs it: by hand (one line, exit status,
  its time), as the Prolog (the job is requeued, the node drained with provision's reason, not
  Slurm's "Prolog error") and as the HealthCheckProgram (drains, then resumes once fixed, and
  leaves the admin's drain alone).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from cluster_support import CLUSTER_DIR, TESTS_DIR
from conftest import run_cli
from slurm_support import SLURM_DIR, ensure_slurm_image, start_slurm_cluster, stop_slurm_cluster

pytestmark = pytest.mark.cluster

NODES = ("sn1", "sn2", "sn3", "sn4")
DRAIN_IMAGE = "provision-slurm-drain:test"
ADMIN_REASON = "disk swap, ticket 4711"


def ensure_drain_image() -> str:
    """The Slurm image plus iperf3 (Docker's layer cache: a no-op until an input changes)."""
    ensure_slurm_image()
    subprocess.run(
        ["docker", "build", "-q", "-t", DRAIN_IMAGE, str(TESTS_DIR / "cluster" / "slurm-drain")],
        check=True,
        capture_output=True,
        text=True,
    )
    return DRAIN_IMAGE


PLACEHOLDER = "#!/bin/sh\nexit 0\n"  # what Slurm runs as Prolog and HealthCheckProgram until a test puts the node check there


def _put(cluster_folder: Path, name: str, text: str) -> None:
    """A script in the cluster's folder (/cluster/slurm on every host), replaced whole: slurmd never
    runs half of one."""
    temporary = cluster_folder / f".{name}.new"
    temporary.write_text(text)
    temporary.chmod(0o755)
    temporary.replace(cluster_folder / name)


@pytest.fixture(scope="module")
def cluster():
    project = f"provdrain{os.getpid()}"
    folder = CLUSTER_DIR / project
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("prolog", "health"):
        _put(folder, name, PLACEHOLDER)
    started = start_slurm_cluster(
        run_cli,
        compose=SLURM_DIR / "drain-compose.yml",
        nodes=NODES,
        project=project,
        image=ensure_drain_image,
        conf_tail="Prolog=/cluster/slurm/prolog\nHealthCheckProgram=/cluster/slurm/health\n"
        "HealthCheckInterval=5\nHealthCheckNodeState=ANY\n",
    )
    try:
        log = started.exec("ctl", "cat", "/var/log/slurm/slurmctld.log", user="root", check=False).stdout[-3000:]
        assert started.node_states() == dict.fromkeys(NODES, "idle"), log
        yield started
    finally:
        stop_slurm_cluster(started)


def _root(cluster, node: str, script: str) -> subprocess.CompletedProcess:
    return cluster.exec(node, "sh", "-ec", script, user="root")


def _slurm(cluster) -> dict[str, tuple[str, str]]:
    """{node: (short state, reason)} as slurmctld has them now, without the "*" of a node whose
    slurmd was slow to answer a ping (this loaded 2-core machine): the drain is what is tested."""
    done = cluster.exec("ctl", "sinfo", "-h", "-N", "-o", "%N|%t|%E")
    lines = (line.split("|", 2) for line in done.stdout.splitlines())
    return {name: (state.rstrip("*"), reason) for name, state, reason in lines}


def _inventory(cluster, unreachable: tuple[str, ...] = ()) -> Path:
    """The cluster's inventory, with ``unreachable`` pointed at a port nothing listens on."""
    if not unreachable:
        return cluster.inventory
    text = cluster.inventory.read_text()
    for name in unreachable:
        text = text.replace(f"port: {cluster.ports[name]}}}", "port: 1}")
    path = cluster.folder / f"hosts-without-{'-'.join(unreachable)}.yml"
    path.write_text(text)
    return path


def _doctor(cluster, *args: str, unreachable: tuple[str, ...] = ()) -> tuple[int, dict]:
    inventory = _inventory(cluster, unreachable)
    common = ["-i", str(inventory), "--known-hosts", str(cluster.known_hosts), "--accept-new-host-keys"]
    done = run_cli("doctor", *NODES, *common, "--json", "--drain", "--slurm-host", "ctl", *args)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def _checks(document: dict) -> dict[str, dict]:
    return {check["name"]: check for check in document["checks"]}


def _marks(document: dict) -> dict[str, dict]:
    return {mark["host"]: mark for mark in document["slurm"]["nodes"]}


def _wait(cluster, node: str, predicate, seconds: float = 60) -> tuple[str, str]:
    deadline = time.monotonic() + seconds
    while True:
        state = _slurm(cluster)[node]
        if predicate(state) or time.monotonic() > deadline:
            return state
        time.sleep(1)


def test_a_lost_gpu_is_drained_an_admins_drain_kept_an_unreached_node_named_and_the_fixed_node_resumed(cluster):
    _root(cluster, "ctl", f"scontrol update NodeName=sn3 State=DRAIN Reason='{ADMIN_REASON}'")
    _root(cluster, "sn2", "touch /run/nvidia-standin-gpu1-gone")
    try:
        code, document = _doctor(cluster, unreachable=("sn4",))
        assert code == 1 and document["schema"] == "provision.doctor" and document["version"] == 1
        hardware = _checks(document)["hardware"]
        assert hardware["status"] == "fail" and hardware["bad_nodes"] == [
            {
                "host": "sn2",
                "status": "fail",
                "why": "GPUs 1 x Tesla V100-SXM2-16GB (the others 2 x Tesla V100-SXM2-16GB)",
            }
        ], hardware
        marks = _marks(document)
        reason = "provision: hardware: GPUs 1 x Tesla V100-SXM2-16GB (the others 2 x Tesla V100-SXM2-16GB)"
        assert marks["sn2"]["outcome"] == "drained" and marks["sn2"]["detail"] == reason, marks
        assert marks["sn3"]["outcome"] == "left" and marks["sn3"]["detail"] == ADMIN_REASON, marks
        assert marks["sn1"]["outcome"] == "up" and "sn4" not in marks, marks
        assert document["slurm"]["not_reached"][0]["host"] == "sn4", document["slurm"]
        # what slurmctld holds, read there
        assert _slurm(cluster) == {
            "sn1": ("idle", "none"),
            "sn2": ("drain", reason),
            "sn3": ("drain", ADMIN_REASON),
            "sn4": ("idle", "none"),
        }

        again_code, again = _doctor(cluster)  # the same fault again: nothing changes
        assert again_code == 1 and _marks(again)["sn2"]["outcome"] == "already", _marks(again)
        assert _slurm(cluster)["sn4"] == ("idle", "none")  # reached and healthy now: nothing to do
    finally:
        _root(cluster, "sn2", "rm -f /run/nvidia-standin-gpu1-gone")

    # fixed, but not reached: left drained (doctor cannot tell that it was fixed)
    _, blind = _doctor(cluster, unreachable=("sn2",))
    assert "sn2" not in _marks(blind) and _slurm(cluster)["sn2"][0] == "drain"
    # fixed and reached: resumed; the admin's drain stays, reason and all
    code, fixed = _doctor(cluster)
    marks = _marks(fixed)
    assert marks["sn2"]["outcome"] == "resumed" and marks["sn3"]["outcome"] == "left", marks
    assert _checks(fixed)["hardware"]["status"] == "pass"
    assert _slurm(cluster) == {
        "sn1": ("idle", "none"),
        "sn2": ("idle", "none"),
        "sn3": ("drain", ADMIN_REASON),
        "sn4": ("idle", "none"),
    }
    assert code == 1  # pairwise SSH still fails here (the nodes hold no key of mpi's): reported, never a drain
    assert _checks(fixed)["pairwise ssh"]["status"] == "fail"


def _address(cluster, node: str) -> str:
    return cluster.exec(node, "sh", "-c", "ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1").stdout.strip()


def test_perf_a_throttled_node_is_drained_and_resumed_a_throttled_link_drains_neither(cluster):
    _root(cluster, "ctl", f"scontrol update NodeName=sn3 State=DRAIN Reason='{ADMIN_REASON}'")  # as the test before left it
    tbf = "tc qdisc add dev eth0 root tbf rate 10mbit burst 10kb latency 50ms"  # far below any link here, loaded or not
    _root(cluster, "sn2", tbf)
    try:
        _, slow_node = _doctor(cluster, "--perf")
    finally:
        _root(cluster, "sn2", "tc qdisc del dev eth0 root")
    perf = _checks(slow_node)["perf tcp eth0"]
    assert perf["status"] == "fail" and [n["host"] for n in perf["bad_nodes"]] == ["sn2"], (perf, slow_node["perf"])
    thresholds = perf["thresholds"]  # the judgement's figures: the others' median, half of it, sn2's 0.01 well below
    assert thresholds["slow_share"] == 0.5 and thresholds["slow_below_gbps"] > 0.02, thresholds
    assert abs(thresholds["slow_below_gbps"] - thresholds["median_gbps"] / 2) <= 0.001, thresholds
    assert perf["coverage"]["pairs_tested"] == 6 and perf["coverage"]["pairs_total"] == 6, perf
    assert _marks(slow_node)["sn2"]["detail"].startswith("provision: perf tcp eth0: bad node: slow with 3 of 3 peers")
    assert _slurm(cluster)["sn2"][0] == "drain"
    [kind] = slow_node["perf"]["kinds"]
    assert kind["nodes"] == list(NODES) and len(kind["matrix_gbps"]) == 4
    row = kind["matrix_gbps"][1]  # what sn2 sent: about 0.01 Gbit/s to each peer, nothing to itself
    assert row[1] is None and all(value < 0.015 for i, value in enumerate(row) if i != 1), kind

    peer = _address(cluster, "sn3")
    shaping = [
        "tc qdisc add dev eth0 root handle 1: htb default 10",
        "tc class add dev eth0 parent 1: classid 1:10 htb rate 10gbit",
        "tc class add dev eth0 parent 1: classid 1:20 htb rate 10mbit ceil 10mbit",
        f"tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst {peer}/32 flowid 1:20",
    ]
    _root(cluster, "sn1", "; ".join(shaping))
    try:
        _, slow_link = _doctor(cluster, "--perf")
    finally:
        _root(cluster, "sn1", "tc qdisc del dev eth0 root")
    perf = _checks(slow_link)["perf tcp eth0"]
    assert perf["bad_nodes"] == [], (perf, slow_link["perf"])
    # the shaped link; on this loaded 2-core machine another pair can dip below half the median too
    [link] = [found for found in perf["bad_links"] if {found["a"], found["b"]} == {"sn1", "sn3"}]
    assert link["verdict"] == "bad link", (link, perf["bad_links"])
    sn1_to_sn3 = link["forward_gbps"] if link["a"] == "sn1" else link["reverse_gbps"]
    sn3_to_sn1 = link["reverse_gbps"] if link["a"] == "sn1" else link["forward_gbps"]
    assert sn1_to_sn3 < 0.015 < sn3_to_sn1, link  # only sn1's egress towards sn3 is shaped
    marks = _marks(slow_link)
    assert marks["sn2"]["outcome"] == "resumed", marks  # its bandwidth is back
    assert marks["sn1"]["outcome"] == "up" and marks["sn3"]["outcome"] == "left", marks  # sn3: still the admin's
    assert (link["a"], link["b"]) in [(b["a"], b["b"]) for b in slow_link["slurm"]["bad_links"]]
    states = _slurm(cluster)  # neither end drained
    assert {node: states[node] for node in ("sn1", "sn2", "sn4")} == dict.fromkeys(("sn1", "sn2", "sn4"), ("idle", "none")), (
        states
    )
    [kind] = slow_link["perf"]["kinds"]
    assert kind["matrix_gbps"][0][2] < 0.015 < kind["matrix_gbps"][2][0], kind


def _node_check(cluster) -> str:
    """The node check for sn1-sn4, rendered by provision from the probed facts."""
    script = run_cli("doctor", *NODES, "-i", str(cluster.inventory), "--facts-dir", str(cluster.facts_dir), "--node-script", "-")
    assert script.returncode == 0, script.stderr
    return script.stdout


def test_the_node_check_by_hand_as_prolog_and_as_health_check(cluster):
    node_check = _node_check(cluster)
    _put(cluster.folder, "node-check", node_check)
    by_hand = "/cluster/slurm/node-check"
    timed = f"s=$(date +%s%N); {by_hand} -v; rc=$?; echo took $(( ($(date +%s%N) - s) / 1000000 )) ms; exit $rc"
    healthy = cluster.exec("sn1", "sh", "-c", timed, user="root", check=False)
    assert healthy.returncode == 0 and healthy.stdout.startswith("took "), healthy
    print(f"node check on a healthy node: {healthy.stdout.strip()} (load {Path('/proc/loadavg').read_text().split()[0]})")
    for check in ("gpu count", "gpu health", "gpu devices", "cpus", "memory", "network"):
        assert f"ok {check}: " in healthy.stderr, healthy.stderr

    reason = "provision: gpu count: nvidia-smi lists 1 GPU(s), expected 2 (and 1 more)"  # and gpu devices
    _root(cluster, "sn2", "touch /run/nvidia-standin-gpu1-gone; rm -f /dev/nvidia1")
    try:
        done = cluster.exec("sn2", by_hand, user="root", check=False)
        assert (done.returncode, done.stdout) == (1, reason + "\n"), done
        assert _slurm(cluster)["sn2"] == ("idle", "none")  # by hand, without --drain: it only says so

        # As the Prolog: the job that lands on sn2 is requeued and held, sn2 drained with provision's
        # reason (slurmctld keeps a drain reason it finds: not "Prolog error")
        _put(cluster.folder, "prolog", node_check)
        job = cluster.exec("ctl", "sbatch", "--parsable", "-w", "sn2", "--wrap", "hostname").stdout.strip()
        assert _wait(cluster, "sn2", lambda s: s[0] == "drain") == ("drain", reason)
        queued = cluster.exec("ctl", "squeue", "-h", "-j", job, "-o", "%T %r", check=False).stdout
        assert queued.startswith("PENDING"), queued
        log = cluster.exec("sn2", "cat", "/var/log/slurm/slurmd.log", user="root").stdout
        assert f"error: prolog failed: rc:1 output:{reason}\n" in log, log[-2000:]  # its one line, in slurmd's log

        # As the HealthCheckProgram (every 5 s): sn2 stays drained while the fault lasts
        _root(cluster, "ctl", f"scontrol update NodeName=sn3 State=DRAIN Reason='{ADMIN_REASON}'")
        _put(cluster.folder, "health", node_check)
        time.sleep(12)
        assert _slurm(cluster)["sn2"] == ("drain", reason)
    finally:
        _root(cluster, "sn2", "rm -f /run/nvidia-standin-gpu1-gone; [ -e /dev/nvidia1 ] || mknod /dev/nvidia1 c 195 1")
    # fixed: the next health check resumes sn2; sn3, drained by an admin, stays as it is
    state = _wait(cluster, "sn2", lambda s: s[0] != "drain")
    assert state == ("idle", "none"), state
    assert _slurm(cluster)["sn3"] == ("drain", ADMIN_REASON)
    cluster.exec("ctl", "scancel", job, check=False)
    log = cluster.exec("sn2", "cat", "/var/log/slurm/slurmd.log", user="root").stdout
    assert f"error: health_check failed: rc:1 output:{reason}\n" in log, log[-2000:]  # slurmd ran it


def test_the_slurm_role_installs_the_node_check_when_asked_and_the_second_run_changes_nothing(cluster, tmp_path):
    """setup-cluster --tags slurm with slurm.health_check: the script doctor --node-script renders, on
    every host, 0755 root's. The role's other files go to scratch paths Slurm does not read here
    (this cluster's slurm.conf is the test's own)."""
    path = "/usr/local/sbin/provision-node-check"
    hosts = ("ctl", *NODES)
    for host in hosts:
        _root(cluster, host, "touch /etc/slurm/scratch-slurm.conf")
    settings = {
        "nodes": "slurm",
        "conf": "/etc/slurm/scratch-slurm.conf",
        "gres": "/etc/slurm/scratch-gres.conf",
        "health_check": path,
    }
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(cluster.inventory.read_text() + "vars:\n  slurm: " + json.dumps(settings) + "\n")
    setup = [
        "setup-cluster", "-i", str(inventory), "--known-hosts", str(cluster.known_hosts), "--facts-dir", str(cluster.facts_dir),
        "--accept-new-host-keys", "--json", "--tags", "slurm",
    ]  # fmt: skip
    first = run_cli(*setup)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    installed = {r["host"]: r["status"] for r in json.loads(first.stdout)["results"] if r["task"] == "the node check"}
    assert installed == dict.fromkeys(hosts, "changed"), installed
    wanted = _node_check(cluster)
    for host in hosts:
        assert cluster.exec(host, "cat", path, user="root").stdout == wanted, host
        assert cluster.exec(host, "stat", "-c", "%a %U %G", path).stdout.split() == ["755", "root", "root"], host
    assert cluster.exec("sn1", path, user="root", check=False).returncode == 0
    second = run_cli(*setup)
    assert {r["host"]: r["changed"] for r in json.loads(second.stdout)["recap"]} == dict.fromkeys(hosts, 0), second.stdout[-2000:]
