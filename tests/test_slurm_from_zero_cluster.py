"""Issue 36, Slurm from zero: on FRESH nodes under systemd (tests/cluster/systemd/: ctl and
sn1-sn3, empty apt lists, no Slurm, no munge), `provision setup-cluster` with `slurm: {controller:
ctl, nodes: gpu}` installs Debian's real slurmctld, slurmd and munge from Debian's archive, gives
every node the one munge key made on the controller, writes slurm.conf, gres.conf and cgroup.conf
and starts the daemons under systemd. Then the real Slurm is asked: `sinfo` shows every node idle
with its GPUs (the TEST STAND-IN nvidia-smi's two V100s, /dev/nvidia0-1 made at boot), srun's
tasks are fenced by the cgroup plugins (cores, memory, the GPU devices they were not given) and
bound by task/affinity, and the batch script of `provision launch --format sbatch` runs on every
node. The second run changes nothing and restarts nothing; a changed setting restarts the
daemons whose files changed. The munge key never appears in the output, --diff or -v."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import time

import pytest
from systemd_support import finished_job, slurm_inventory, systemd_cluster

from conftest import run_cli

pytestmark = pytest.mark.cluster

NODES = ("sn1", "sn2", "sn3")
HOSTS = ("ctl", *NODES)
GRES = "gpu:tesla_v100-sxm2-16gb:2(S:0)"  # (S:0): both GPUs next to socket 0 (gres.conf Cores=)


@pytest.fixture(scope="module")
def zero(tmp_path_factory):
    material = tmp_path_factory.mktemp("slurm-zero")
    with systemd_cluster(f"provslurmzero{os.getpid()}", material) as cluster:
        yield cluster, slurm_inventory(cluster, material), material


def _setup(zero, *args):
    _, inventory, material = zero
    done = run_cli("setup-cluster", "-i", str(inventory), "--known-hosts", str(material / "known_hosts"), "--json", *args)
    data = json.loads(done.stdout) if done.stdout.startswith("{") else {}
    return done, data


def _failed(data) -> list:
    return [(r["host"], r["task"], r["message"]) for r in data.get("results", []) if r["status"] == "failed"]


def _key_shown(key: bytes, text: str) -> list[str]:
    """The encodings of ``key`` found in ``text`` (none, or the test fails naming them)."""
    forms = {
        "hex": key.hex(),
        "base64": base64.b64encode(key).decode(),
        "base64 (first 40)": base64.b64encode(key).decode()[:40],
        "raw": key.decode("latin-1"),
    }
    return [name for name, form in forms.items() if form in text]


def _main_pids(cluster) -> dict[str, str]:
    pids = {"ctl": cluster.docker_exec("ctl", "systemctl", "show", "-p", "MainPID", "--value", "slurmctld").strip()}
    pids.update({n: cluster.docker_exec(n, "systemctl", "show", "-p", "MainPID", "--value", "slurmd").strip() for n in NODES})
    return pids


def _sinfo(cluster, seconds: float = 180) -> dict[str, str]:
    """{node: "STATE GRES"} once every node is idle (or after ``seconds``)."""
    states: dict[str, str] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out = cluster.docker_exec("ctl", "sh", "-c", "sinfo -N -h -o '%N %T %G' 2>/dev/null; true")
        states = {line.split()[0]: " ".join(line.split()[1:]) for line in out.splitlines() if line.strip()}
        if sorted(states) == list(NODES) and all(v.startswith("idle ") for v in states.values()):
            break
        time.sleep(1)
    return states


def _log(cluster, node: str, name: str) -> str:
    return cluster.docker_exec(node, "sh", "-c", f"tail -40 /var/log/slurm/{name}.log 2>/dev/null; true")


def test_fresh_nodes_to_an_idle_slurm_cluster_and_the_second_run_changes_nothing(zero):
    cluster, inventory, material = zero
    for host in HOSTS:  # as the nodes come: no package index, no Slurm, no munge
        assert cluster.docker_exec(host, "sh", "-c", "ls /var/lib/apt/lists | grep -c _Packages; true").strip() == "0"
        assert cluster.docker_exec(host, "sh", "-c", "command -v slurmd slurmctld munged; true") == ""
    probe = run_cli("probe", "gpu", "-i", str(inventory), "--known-hosts", str(material / "known_hosts"))
    assert probe.returncode == 0, probe.stdout + probe.stderr

    check, _ = _setup(zero, "--check", "--diff", "-v")
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    key_file = material / "secrets" / "munge.key"  # made once, before any host was touched
    key = key_file.read_bytes()
    assert (len(key), oct(key_file.stat().st_mode & 0o7777), oct(key_file.parent.stat().st_mode & 0o777)) == (
        128,
        "0o400",
        "0o700",
    )
    for host in HOSTS:  # --check touched nothing
        assert cluster.docker_exec(host, "sh", "-c", "command -v slurmd slurmctld munged; true") == ""

    started = time.monotonic()
    first, data = _setup(zero, "--diff", "-v")
    print(f"fresh nodes to a running Slurm (4 nodes, packages from Debian's archive): {time.monotonic() - started:.1f} s")
    assert first.returncode == 0 and not _failed(data), (_failed(data), first.stderr[-3000:])
    assert key_file.read_bytes() == key  # the same key: made once
    for text in (check.stdout + check.stderr, first.stdout + first.stderr):
        assert _key_shown(key, text) == []
    digest = hashlib.sha256(key).hexdigest()
    for host in HOSTS:
        installed = cluster.docker_exec(
            host, "sh", "-c", "sha256sum </etc/munge/munge.key | cut -c1-64; stat -c '%a %U %G' /etc/munge/munge.key"
        )
        assert installed.split("\n")[:2] == [digest, "400 munge munge"], host
        assert cluster.docker_exec(host, "systemctl", "is-active", "munge").strip() == "active"
        assert cluster.docker_exec(host, "systemctl", "is-enabled", "munge").strip() == "enabled"
    assert cluster.docker_exec("ctl", "systemctl", "is-active", "slurmctld").strip() == "active"
    assert cluster.docker_exec("ctl", "systemctl", "is-enabled", "slurmctld").strip() == "enabled"
    conf = cluster.docker_exec("ctl", "cat", "/etc/slurm/slurm.conf")
    for node in NODES:
        assert cluster.docker_exec(node, "systemctl", "is-active", "slurmd").strip() == "active", _log(cluster, node, "slurmd")
        assert cluster.docker_exec(node, "systemctl", "is-enabled", "slurmd").strip() == "enabled"
        assert cluster.docker_exec(node, "cat", "/etc/slurm/slurm.conf") == conf  # one file everywhere
    assert "SlurmctldHost=ctl\n" in conf and "TaskPlugin=task/affinity,task/cgroup\n" in conf
    assert re.search(r"^NodeName=sn\[1-3\] CPUs=\d+ .* Gres=gpu:tesla_v100-sxm2-16gb:2$", conf, re.MULTILINE), conf

    states = _sinfo(cluster)
    assert states == dict.fromkeys(NODES, f"idle {GRES}"), (states, _log(cluster, "ctl", "slurmctld"))

    pids = _main_pids(cluster)
    second, again = _setup(zero, "-v")
    assert second.returncode == 0, (_failed(again), second.stderr[-2000:])
    assert {r["host"]: r["changed"] for r in again["recap"]} == dict.fromkeys(HOSTS, 0), again["recap"]
    assert _main_pids(cluster) == pids  # nothing changed: nothing restarted
    assert _key_shown(key, second.stdout + second.stderr) == []


# What each task of a job step sees: its host, the cgroups it was put in, the CPUs it may run on,
# the GPUs Slurm gave it, and whether the kernel lets it open each GPU's device file (the stand-in
# GPUs have no driver: an allowed open fails "No such device or address", a denied one
# "Operation not permitted").
STEP = (
    'echo "host $(hostname)"; grep -E "^[0-9]+:(freezer|memory|devices):" /proc/self/cgroup; '
    'echo "cpus $(grep Cpus_allowed_list /proc/self/status | cut -f2)"; echo "cuda $CUDA_VISIBLE_DEVICES"; '
    'for d in /dev/nvidia0 /dev/nvidia1; do if head -c1 "$d" >/dev/null 2>/tmp/open.$$; then echo "$d read"; '
    'else echo "$d $(sed "s/.*: //" /tmp/open.$$)"; fi; done; rm -f /tmp/open.$$'
)


def test_job_steps_are_fenced_by_the_cgroup_plugins_and_bound_by_task_affinity(zero):
    cluster, _, _ = zero
    done = cluster.docker_exec(
        "ctl", "runuser", "-u", "mpi", "--", "srun", "--chdir=/", "-N3", "--ntasks-per-node=1", "--gres=gpu:1", "--mem=100",
        "--label", "sh", "-c", STEP,
    )  # fmt: skip
    tasks: dict[str, list[str]] = {}
    for line in done.splitlines():
        label, _, text = line.partition(": ")
        tasks.setdefault(label.strip(), []).append(text)
    assert sorted(tasks) == ["0", "1", "2"], done
    hosts = set()
    for lines in tasks.values():
        host = lines[0].removeprefix("host ")
        hosts.add(host)
        # proctrack/cgroup (freezer) and task/cgroup (memory, devices): the step's own cgroups
        cgroups = dict(re.findall(r"^\d+:(freezer|memory|devices):(\S+)$", "\n".join(lines), re.MULTILINE))
        assert sorted(cgroups) == ["devices", "freezer", "memory"], lines
        assert all(re.fullmatch(rf"/slurm_{host}/uid_1000/job_\d+/step_0(/task_0)?", p) for p in cgroups.values()), lines
        assert re.fullmatch(r"cpus \d+", lines[-4]), lines  # one CPU: its core (ConstrainCores, task/affinity)
        assert lines[-3:] == ["cuda 0", "/dev/nvidia0 No such device or address", "/dev/nvidia1 Operation not permitted"], lines
    assert hosts == set(NODES), done
    # the memory cgroup holds the step to what it asked for (--mem=100: 100 MiB)
    limit = cluster.docker_exec(
        "ctl", "runuser", "-u", "mpi", "--", "srun", "--chdir=/", "-N1", "--mem=100", "sh", "-c",
        'cat /sys/fs/cgroup/memory/slurm_$(hostname)/uid_1000/job_$SLURM_JOB_ID/memory.limit_in_bytes',
    )  # fmt: skip
    assert limit.strip() == str(100 * 1024 * 1024), limit


def test_the_batch_script_of_launch_format_sbatch_runs_on_every_node(zero, tmp_path):
    cluster, inventory, material = zero
    program = ["sh", "-c", 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname)"']
    made = run_cli("launch", "2x3x1", "--hosts", ",".join(NODES), "-i", str(inventory), "--format", "sbatch", "--", *program)
    assert made.returncode == 0, made.stderr
    script = tmp_path / "job.sh"
    script.write_text(made.stdout)
    subprocess.run(["docker", "cp", str(script), f"{cluster.container('ctl')}:/home/mpi/job.sh"], check=True)
    cluster.docker_exec("ctl", "chown", "mpi:mpi", "/home/mpi/job.sh")
    submitted = cluster.docker_exec(
        "ctl", "runuser", "-u", "mpi", "--", "sbatch", "--wait", "--chdir=/tmp", "--output=/tmp/job-%j.out", "/home/mpi/job.sh"
    )
    job = re.search(r"Submitted batch job (\d+)", submitted).group(1)
    accounted = finished_job(lambda: cluster.docker_exec("ctl", "scontrol", "show", "job", job))
    assert "JobState=COMPLETED" in accounted and "ExitCode=0:0" in accounted, accounted
    # the output is on the batch host (the first node; the nodes share no file system)
    output = cluster.docker_exec("sn1", "cat", f"/tmp/job-{job}.out")
    ranks = dict(re.findall(r"^rank (\d+) on (\w+)$", output, re.MULTILINE))
    assert sorted(ranks) == [str(r) for r in range(6)], output
    assert sorted(set(ranks.values())) == list(NODES), output  # two ranks on each node


def test_a_changed_setting_restarts_the_daemons_whose_files_changed(zero):
    cluster, inventory, _ = zero
    pids = _main_pids(cluster)
    inventory.write_text(
        inventory.read_text().replace("{controller: ctl, nodes: gpu}", "{controller: ctl, nodes: gpu, partition: gpu}")
    )
    done, data = _setup(zero)
    assert done.returncode == 0, (_failed(data), done.stderr[-2000:])
    restarted = sorted(
        {r["host"] for r in data["results"] if r["task"].endswith("restarted (its files changed)") and r["status"] == "changed"}
    )
    assert restarted == list(HOSTS), restarted
    now = _main_pids(cluster)
    assert all(now[h] != pids[h] for h in HOSTS), (pids, now)
    assert all(r["status"] != "changed" for r in data["results"] if r["task"].startswith("munge")), "munge kept running"
    assert _sinfo(cluster) == dict.fromkeys(NODES, f"idle {GRES}")
    assert cluster.docker_exec("ctl", "sinfo", "-h", "-o", "%P").split() == ["gpu*"]
