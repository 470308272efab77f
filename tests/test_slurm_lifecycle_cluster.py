"""Issue 36, doctor in Slurm's job lifecycle, on real slurmctld, slurmd and munge under systemd:
FRESH nodes (tests/cluster/systemd/: ctl and sn1-sn4, four compute nodes so that doctor --perf
can tell a bad node from a bad link; NET_ADMIN for tc) taken to a running Slurm by `provision
setup-cluster` with the node check asked for (`slurm.health_check`, as the Prolog too), then:

- the role installs the node check on every Slurm host, the slurm.conf it writes names it and
  slurmctld runs with it; the second run changes nothing;
- slurmd runs it: as the Prolog (the job requeued, the node drained with provision's reason), when
  slurmd starts (still failing: drained; fixed: resumed) and every HealthCheckInterval on a
  drained node (drained, then resumed once fixed, slurmd never restarted);
- `doctor --drain` (scontrol on the inventory's slurm.controller, through sudo): a node whose GPU
  stand-in lost a GPU is drained with provision's reason, an admin's drain is left alone, a node
  whose sshd is stopped is named and neither drained nor resumed blind, the fixed node resumed once
  reached;
- `doctor --perf --drain`: a node throttled with tc tbf is drained as a bad node and resumed once
  the shaping is gone; a link throttled with htb + u32 drains neither end and is reported with
  both directions' figures in `--json`;
- `sbatch` of `launch --format sbatch`'s script runs on the nodes left idle.

The nodes' nvidia-smi is the TEST STAND-IN tests/cluster/slurm/standins/nvidia-smi: GPU N is gone
while /run/nvidia-standin-gpuN-gone exists. The rule's other cases (down, rebooting, reasons that
forge a line) run in the unit tier (tests/test_slurm_marks.py, tests/test_doctor_drain.py,
tests/test_node_check.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from systemd_support import finished_job, start_slurm_from_zero, systemd_cluster

from conftest import run_cli

pytestmark = pytest.mark.cluster

NODES = ("sn1", "sn2", "sn3", "sn4")
HOSTS = ("ctl", *NODES)
CHECK = "/usr/local/sbin/provision-node-check"
# one run an hour until the last test: slurmd then runs the node check only when it starts (or a
# test sets a short interval), so no periodic run falls into doctor's runs and drains first
SLURM = f"{{controller: ctl, nodes: gpu, health_check: {CHECK}, health_check_interval: 3600, health_check_prolog: true}}"
ADMIN_REASON = "disk swap, ticket 4711"
GPU_GONE = "provision: gpu count: nvidia-smi lists 1 GPU(s), expected 2 (and 1 more)"  # and gpu devices
GPU_SHORT = "provision: gpu count: nvidia-smi lists 1 GPU(s), expected 2"  # the devices there
HARDWARE = "provision: hardware: GPUs 1 x Tesla V100-SXM2-16GB (the others 2 x Tesla V100-SXM2-16GB)"


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


@pytest.fixture(scope="module")
def lifecycle(tmp_path_factory):
    material = tmp_path_factory.mktemp("slurm-lifecycle")
    started = time.monotonic()
    with systemd_cluster(f"provslurmlife{os.getpid()}", material, HOSTS) as cluster:
        booted = time.monotonic()
        inventory, took = start_slurm_from_zero(cluster, material, run_cli, SLURM, HOSTS)
        print(f"\n5 fresh nodes booted in {booted - started:.0f} s; Slurm from zero in {took:.0f} s (load {_load()})")
        yield cluster, inventory, material


def _sh(cluster, node: str, script: str, user: str = "root") -> subprocess.CompletedProcess:
    """``script`` run by sh on ``node`` as ``user`` (test set-up and reading back; its exit status is the caller's)."""
    return subprocess.run(
        ["docker", "exec", "-u", user, cluster.container(node), "sh", "-c", script], capture_output=True, text=True
    )


def _root(cluster, node: str, script: str) -> str:
    done = _sh(cluster, node, f"set -e; {script}")
    assert done.returncode == 0, f"{node}: {script}: {done.stderr[-600:]}"
    return done.stdout


def _slurm(cluster) -> dict[str, tuple[str, str]]:
    """{node: (short state, reason)} as slurmctld has them now, without the "*" of a node whose
    slurmd was slow to answer a ping (this loaded 2-core machine): the drain is what is tested."""
    out = _root(cluster, "ctl", "sinfo -h -N -o '%N|%t|%E'")
    lines = (line.split("|", 2) for line in out.splitlines())
    return {name: (state.rstrip("*"), reason) for name, state, reason in lines}


def _states(**changed: tuple[str, str]) -> dict[str, tuple[str, str]]:
    """What _slurm should read: every node idle, but those ``changed`` names."""
    return {node: changed.get(node, ("idle", "none")) for node in NODES}


def _wait(cluster, node: str, predicate, seconds: float = 90) -> tuple[str, str]:
    deadline = time.monotonic() + seconds
    while True:
        state = _slurm(cluster)[node]
        if predicate(state) or time.monotonic() > deadline:
            return state
        time.sleep(1)


def _until(predicate, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"still not so after {seconds} s"
        time.sleep(1)


def _slurmd_log(cluster, node: str) -> str:
    return _root(cluster, node, "cat /var/log/slurm/slurmd.log")


def _admin_drain(cluster) -> None:
    _root(cluster, "ctl", f"scontrol update NodeName=sn3 State=DRAIN Reason='{ADMIN_REASON}'")


def _lose_gpu(cluster, node: str) -> None:
    """GPU 1 fallen off the bus: nvidia-smi no longer lists it and its device file is gone."""
    _root(cluster, node, "touch /run/nvidia-standin-gpu1-gone; rm -f /dev/nvidia1")


def _fix_gpu(cluster, node: str) -> None:
    _root(cluster, node, "rm -f /run/nvidia-standin-gpu1-gone; [ -e /dev/nvidia1 ] || mknod -m 666 /dev/nvidia1 c 195 1")


def _setup(lifecycle, *args: str) -> dict:
    cluster, inventory, material = lifecycle
    done = run_cli("setup-cluster", "-i", str(inventory), "--known-hosts", str(material / "known_hosts"), "--json", *args)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout)


def _main_pid(cluster, node: str, unit: str) -> str:
    return _root(cluster, node, f"systemctl show -p MainPID --value {unit}").strip()


def test_the_role_installs_the_node_check_slurm_runs_with_it_and_the_second_run_changes_nothing(lifecycle):
    cluster, inventory, material = lifecycle
    wanted = run_cli("doctor", "gpu", "-i", str(inventory), "--node-script", "-")
    assert wanted.returncode == 0, wanted.stderr
    assert wanted.stdout.count(") gpus=2; gpu_files='/dev/nvidia0 /dev/nvidia1';") == 4, wanted.stdout  # sn1-sn4, probed
    conf = _root(cluster, "ctl", "cat /etc/slurm/slurm.conf")
    for host in HOSTS:  # every host that reads slurm.conf: the same script, root's, and the same file
        assert _root(cluster, host, f"cat {CHECK}") == wanted.stdout, host
        assert _root(cluster, host, f"stat -c '%a %U %G' {CHECK}").split() == ["755", "root", "root"], host
        assert _root(cluster, host, "cat /etc/slurm/slurm.conf") == conf, host
    # what slurmctld read from the slurm.conf provision wrote
    config = dict(re.findall(r"^(\w+)\s+= (.*)$", _root(cluster, "ctl", "scontrol show config"), re.MULTILINE))
    assert (config["HealthCheckProgram"], config["HealthCheckInterval"], config["HealthCheckNodeState"]) == (
        CHECK,
        "3600 sec",
        "ANY",
    ), config
    assert config["Prolog"] == CHECK, config

    timed = f"s=$(date +%s%N); {CHECK} -v; rc=$?; echo took $(( ($(date +%s%N) - s) / 1000000 )) ms; exit $rc"
    healthy = _sh(cluster, "sn1", timed)
    assert healthy.returncode == 0 and healthy.stdout.startswith("took "), healthy
    print(f"node check on a healthy node: {healthy.stdout.strip()} (load {_load()})")
    for check in ("gpu count", "gpu health", "gpu devices", "cpus", "memory", "network"):
        assert f"ok {check}: " in healthy.stderr, healthy.stderr

    pids = {host: _main_pid(cluster, host, "slurmctld" if host == "ctl" else "slurmd") for host in HOSTS}
    again = _setup(lifecycle)
    assert {r["host"]: r["changed"] for r in again["recap"]} == dict.fromkeys(HOSTS, 0), again["recap"]
    assert {r["host"]: r["status"] for r in again["results"] if r["task"] == "the node check"} == dict.fromkeys(HOSTS, "ok")
    assert {host: _main_pid(cluster, host, "slurmctld" if host == "ctl" else "slurmd") for host in HOSTS} == pids


def test_slurmd_runs_the_node_check_as_the_prolog_and_when_it_starts_drains_and_resumes(lifecycle):
    cluster, _, _ = lifecycle
    _admin_drain(cluster)
    _lose_gpu(cluster, "sn2")
    try:
        by_hand = _sh(cluster, "sn2", CHECK)  # by hand, without --drain: it only says so
        assert (by_hand.returncode, by_hand.stdout) == (1, GPU_GONE + "\n"), by_hand
        assert _slurm(cluster)["sn2"] == ("idle", "none")

        # As the Prolog: the job that lands on sn2 is requeued and held, sn2 drained with provision's
        # reason (slurmctld keeps a drain reason it finds: not "Prolog error")
        job = _root(cluster, "ctl", "runuser -u mpi -- sbatch --parsable --chdir=/tmp -w sn2 --wrap hostname").strip()
        assert _wait(cluster, "sn2", lambda s: s[0] == "drain") == ("drain", GPU_GONE)
        queued = _root(cluster, "ctl", f"squeue -h -j {job} -o '%T %r'")
        assert queued.startswith("PENDING"), queued
        assert f"error: prolog failed: rc:1 output:{GPU_GONE}\n" in _slurmd_log(cluster, "sn2")  # its one line
        _root(cluster, "ctl", f"scancel {job}")

        # slurmd restarted while /dev/nvidia1 (a File= of gres.conf) is gone: real slurmd waits 20 s
        # for it, then refuses to start, so no start-up check runs; sn2 keeps provision's reason
        _root(cluster, "sn2", "systemctl restart slurmd || true")
        _until(lambda: "fatal: can't stat gres.conf file /dev/nvidia1" in _slurmd_log(cluster, "sn2"), 90)
        assert _sh(cluster, "sn2", "systemctl is-active slurmd").stdout.strip() != "active"
        assert _slurm(cluster)["sn2"] == ("drain", GPU_GONE)

        # the device file back, nvidia-smi still one GPU short: slurmd starts, its start-up run fails
        # and sn2 stays drained, its reason now the one check that still fails
        _root(cluster, "sn2", "mknod -m 666 /dev/nvidia1 c 195 1; systemctl restart slurmd")
        _until(lambda: f"health_check failed: rc:1 output:{GPU_SHORT}\n" in _slurmd_log(cluster, "sn2"), 90)
        assert _wait(cluster, "sn2", lambda s: s[1] == GPU_SHORT) == ("drain", GPU_SHORT)
    finally:
        _fix_gpu(cluster, "sn2")
    # fixed: slurmd's start-up run passes and resumes sn2; sn3, drained by an admin, stays as it is
    _root(cluster, "sn2", "systemctl restart slurmd")
    assert _wait(cluster, "sn2", lambda s: s[0] != "drain") == ("idle", "none")
    assert _slurm(cluster) == _states(sn3=("drain", ADMIN_REASON))
    said = _root(cluster, "sn2", "journalctl -q -t provision-node-check -o cat")  # what it did, in the node's journal
    assert f"mark sn2 drained {GPU_GONE}" in said and "mark sn2 resumed" in said, said


def _doctor(lifecycle, *args: str) -> tuple[int, dict]:
    """``doctor gpu --json --drain``: scontrol on the inventory's slurm.controller (ctl)."""
    cluster, inventory, material = lifecycle
    done = run_cli(
        "doctor", "gpu", "-i", str(inventory), "--known-hosts", str(material / "known_hosts"), "--json", "--drain", *args
    )
    assert done.stdout.strip(), done.stderr
    document = json.loads(done.stdout)
    assert document["slurm"]["slurm_host"] == "ctl" and document["slurm"]["error"] is None, document["slurm"]
    return done.returncode, document


def _checks(document: dict) -> dict[str, dict]:
    return {check["name"]: check for check in document["checks"]}


def _marks(document: dict) -> dict[str, dict]:
    return {mark["host"]: mark for mark in document["slurm"]["nodes"]}


def test_doctor_drains_a_lost_gpu_leaves_an_admins_drain_names_an_unreached_node_and_resumes_the_fixed_one(lifecycle):
    cluster, _, _ = lifecycle
    _admin_drain(cluster)
    _lose_gpu(cluster, "sn2")
    _root(cluster, "sn4", "systemctl stop ssh")  # sn4 cannot be reached; its slurmd runs on
    try:
        code, document = _doctor(lifecycle)
        assert code == 1 and document["schema"] == "provision.doctor" and document["version"] == 1
        hardware = _checks(document)["hardware"]
        assert hardware["status"] == "fail" and hardware["bad_nodes"] == [
            {"host": "sn2", "status": "fail", "why": HARDWARE.removeprefix("provision: hardware: ")}
        ], hardware
        marks = _marks(document)
        assert marks["sn2"]["outcome"] == "drained" and marks["sn2"]["detail"] == HARDWARE, marks
        assert marks["sn3"]["outcome"] == "left" and marks["sn3"]["detail"] == ADMIN_REASON, marks
        assert marks["sn1"]["outcome"] == "up" and "sn4" not in marks, marks
        [unreached] = document["slurm"]["not_reached"]
        assert unreached["host"] == "sn4" and unreached["why"], document["slurm"]
        # what slurmctld holds, read there (sinfo -R's reason)
        assert _slurm(cluster) == _states(sn2=("drain", HARDWARE), sn3=("drain", ADMIN_REASON))
        assert f"{HARDWARE}" in _root(cluster, "ctl", "sinfo -R -h -o '%n|%E'")

        _root(cluster, "sn4", "systemctl start ssh")
        again_code, again = _doctor(lifecycle)  # the same fault again: nothing changes
        assert again_code == 1 and _marks(again)["sn2"]["outcome"] == "already", _marks(again)
        assert _marks(again)["sn4"]["outcome"] == "up" and _slurm(cluster)["sn4"] == ("idle", "none")
    finally:
        _root(cluster, "sn4", "systemctl start ssh")
        _fix_gpu(cluster, "sn2")

    _root(cluster, "sn2", "systemctl stop ssh")  # fixed, but not reached: left drained (doctor cannot tell)
    try:
        _, blind = _doctor(lifecycle)
    finally:
        _root(cluster, "sn2", "systemctl start ssh")
    assert "sn2" not in _marks(blind) and [u["host"] for u in blind["slurm"]["not_reached"]] == ["sn2"], blind["slurm"]
    assert _slurm(cluster)["sn2"] == ("drain", HARDWARE)
    # fixed and reached: resumed; the admin's drain stays, reason and all
    code, fixed = _doctor(lifecycle)
    marks = _marks(fixed)
    assert marks["sn2"]["outcome"] == "resumed" and marks["sn3"]["outcome"] == "left", marks
    assert _checks(fixed)["hardware"]["status"] == "pass"
    assert _slurm(cluster) == _states(sn3=("drain", ADMIN_REASON))
    assert code == 1  # pairwise SSH still fails here (the nodes hold no key of mpi's): reported, never a drain
    assert _checks(fixed)["pairwise ssh"]["status"] == "fail"


def _address(cluster, node: str) -> str:
    return _root(cluster, node, "ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1").strip()


def _install_iperf3(cluster) -> None:
    """Debian's iperf3 on the compute nodes (apt's lists are there since the role's packages)."""
    install = "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iperf3 >/dev/null"
    with ThreadPoolExecutor(len(NODES)) as pool:
        list(pool.map(lambda node: _root(cluster, node, install), NODES))


def test_perf_a_throttled_node_is_drained_and_resumed_a_throttled_link_drains_neither(lifecycle):
    cluster, _, _ = lifecycle
    _install_iperf3(cluster)
    _admin_drain(cluster)
    _root(cluster, "sn2", "tc qdisc add dev eth0 root tbf rate 10mbit burst 10kb latency 50ms")  # far below any link here
    try:
        _, slow_node = _doctor(lifecycle, "--perf")
    finally:
        _root(cluster, "sn2", "tc qdisc del dev eth0 root")
    perf = _checks(slow_node)["perf tcp eth0"]
    assert perf["status"] == "fail" and [n["host"] for n in perf["bad_nodes"]] == ["sn2"], (perf, slow_node["perf"])
    thresholds = perf["thresholds"]  # the judgement's figures: the others' median, half of it, sn2's 0.01 well below
    assert thresholds["slow_share"] == 0.5 and thresholds["slow_below_gbps"] > 0.02, thresholds
    assert abs(thresholds["slow_below_gbps"] - thresholds["median_gbps"] / 2) <= 0.001, thresholds
    assert perf["coverage"]["pairs_tested"] == 6 and perf["coverage"]["pairs_total"] == 6, perf
    reason = _marks(slow_node)["sn2"]["detail"]
    assert reason.startswith("provision: perf tcp eth0: bad node: slow with 3 of 3 peers"), _marks(slow_node)
    assert _slurm(cluster)["sn2"] == ("drain", reason)
    [kind] = slow_node["perf"]["kinds"]
    assert kind["nodes"] == list(NODES) and len(kind["matrix_gbps"]) == 4
    row = kind["matrix_gbps"][1]  # what sn2 sent: about 0.01 Gbit/s to each peer, nothing to itself
    assert row[1] is None and all(value < 0.015 for i, value in enumerate(row) if i != 1), kind

    peer = _address(cluster, "sn3")
    # Only sn1's data towards sn3 is shaped. Its bare ACKs (IP header of 5 words, under 64 bytes,
    # TCP flags ACK alone) stay in the fast class: queued behind 10 Mbit/s they held sn3's own
    # sending to sn1 near 12 Mbit/s on a loaded machine, and the unshaped direction read as shaped.
    shaping = [
        "tc qdisc add dev eth0 root handle 1: htb default 10",
        "tc class add dev eth0 parent 1: classid 1:10 htb rate 10gbit",
        "tc class add dev eth0 parent 1: classid 1:20 htb rate 10mbit ceil 10mbit",
        "tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip protocol 6 0xff match u8 0x05 0x0f at 0 "
        "match u16 0x0000 0xffc0 at 2 match u8 0x10 0xff at 33 flowid 1:10",
        f"tc filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dst {peer}/32 flowid 1:20",
    ]
    _root(cluster, "sn1", "; ".join(shaping))
    try:
        _, slow_link = _doctor(lifecycle, "--perf")
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
    assert _slurm(cluster) == _states(sn3=("drain", ADMIN_REASON))  # neither end drained
    [kind] = slow_link["perf"]["kinds"]
    assert kind["matrix_gbps"][0][2] < 0.015 < kind["matrix_gbps"][2][0], kind


def test_every_health_check_interval_slurmd_runs_it_on_a_drained_node_too_and_resumes_it_once_fixed(lifecycle):
    """HealthCheckInterval=10 (the inventory's health_check_interval; the run restarts the daemons
    whose slurm.conf changed): slurmctld asks each node's slurmd to run the check, drained ones
    too (HealthCheckNodeState=ANY), slurmd never restarted by the test."""
    cluster, inventory, _ = lifecycle
    inventory.write_text(inventory.read_text().replace("health_check_interval: 3600", "health_check_interval: 10"))
    changed = _setup(lifecycle)
    assert {
        r["host"] for r in changed["results"] if r["task"] == "slurm.conf (written whole)" and r["status"] == "changed"
    } == set(HOSTS)
    assert "HealthCheckInterval=10\n" in _root(cluster, "sn2", "cat /etc/slurm/slurm.conf")
    assert _wait(cluster, "sn1", lambda s: s[0] == "idle") == ("idle", "none")
    _admin_drain(cluster)
    pid = _main_pid(cluster, "sn2", "slurmd")
    _lose_gpu(cluster, "sn2")
    try:
        assert _wait(cluster, "sn2", lambda s: s[0] == "drain") == ("drain", GPU_GONE)
        time.sleep(12)  # another run or more, while drained and still failing: no change
        assert _slurm(cluster)["sn2"] == ("drain", GPU_GONE)
    finally:
        _fix_gpu(cluster, "sn2")
    assert _wait(cluster, "sn2", lambda s: s[0] != "drain") == ("idle", "none")
    assert _main_pid(cluster, "sn2", "slurmd") == pid  # the periodic runs did it, not a start-up one
    assert _slurm(cluster)["sn3"] == ("drain", ADMIN_REASON)
    assert _slurmd_log(cluster, "sn2").count(f"health_check failed: rc:1 output:{GPU_GONE}\n") >= 2


def test_the_batch_script_of_launch_format_sbatch_runs_on_the_nodes_left_idle(lifecycle, tmp_path):
    cluster, inventory, _ = lifecycle
    _admin_drain(cluster)
    idle = sorted(node for node, (state, _) in _slurm(cluster).items() if state == "idle")
    assert idle == ["sn1", "sn2", "sn4"]
    program = ["sh", "-c", 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname)"']
    made = run_cli("launch", "2x3x1", "--hosts", ",".join(idle), "-i", str(inventory), "--format", "sbatch", "--", *program)
    assert made.returncode == 0, made.stderr
    script = tmp_path / "job.sh"
    script.write_text(made.stdout)
    subprocess.run(["docker", "cp", str(script), f"{cluster.container('ctl')}:/home/mpi/job.sh"], check=True)
    _root(cluster, "ctl", "chown mpi:mpi /home/mpi/job.sh")
    submitted = _root(
        cluster, "ctl", "runuser -u mpi -- sbatch --wait --chdir=/tmp --output=/tmp/job-%j.out /home/mpi/job.sh"
    )  # the node check runs first on each node, as the Prolog: they pass
    job = re.search(r"Submitted batch job (\d+)", submitted).group(1)
    accounted = finished_job(lambda: _root(cluster, "ctl", f"scontrol show job {job}"))
    assert "JobState=COMPLETED" in accounted and "ExitCode=0:0" in accounted, accounted
    output = _root(cluster, idle[0], f"cat /tmp/job-{job}.out")  # on the batch host (the nodes share no file system)
    ranks = dict(re.findall(r"^rank (\d+) on (\w+)$", output, re.MULTILINE))
    assert sorted(ranks) == [str(r) for r in range(6)], output
    assert sorted(set(ranks.values())) == idle, output  # two ranks on each idle node, none on sn3
