"""What the probe benchmarks measure besides wall time (issue 37): the nodes' CPU, the relay's CPU,
the gather script alone on a node, and the controller's phases, each per host, in the same run.

- :func:`node_cpu`: CPU of every process of the given containers (their cgroups: sshd, the user's
  shell, the gather script), read before and after a tool's run. On one machine the nodes share
  the controller's cores, so their CPU is wall time; on a real cluster each node has its own.
- :func:`relay_cpu`: CPU of the docker-proxy processes that relay the published ports (every
  byte of every packet passes through them on this test bed, not on a real cluster).
- :func:`gather_alone`: the node's CPU for one run of the gather script, no SSH (``docker exec``
  as the SSH user, ``times`` of a driver shell; median of batches).
- :func:`controller_phases`: the controller's CPU per host for each phase of a probe, timed in
  this process on the real outputs of the nodes at hand: the fan-out's threads, splitting the
  framed output, deriving the facts (parsing), the ``--json`` document, saving the facts folder;
  and the start-up of the ``provision probe`` command (its own process).
- :func:`run_header`: date, commit, cores and load, printed first by every bench.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from console import tool

ROOT = Path(__file__).resolve().parent.parent


def run_header(what: str) -> str:
    """``2026-12-02 04:10 UTC, commit abc1234 (+changes), 2 cores, load 3.1 2.0 1.5: WHAT``."""
    git = ["git", "-C", str(ROOT)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
    commit = (commit or "unknown") + (" (+uncommitted changes)" if dirty.strip() else "")
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    return f"{time.strftime('%Y-%m-%d %H:%M %Z')}, commit {commit}, {len(os.sched_getaffinity(0))} cores, load {load}: {what}"


def container_ids(names: list[str]) -> list[str]:
    """Docker's full ids of the named containers."""
    done = subprocess.run(["docker", "inspect", "-f", "{{.Id}}", *names], capture_output=True, text=True, check=True)
    return done.stdout.split()


def _cgroup_usage(container_id: str) -> float | None:
    """CPU seconds the container's cgroup has used (cgroup v1 or v2, cgroupfs or systemd driver)."""
    v1 = Path("/sys/fs/cgroup/cpuacct/docker") / container_id / "cpuacct.usage"
    if v1.exists():
        return int(v1.read_text()) / 1e9
    v2 = (Path("/sys/fs/cgroup/system.slice") / f"docker-{container_id}.scope", Path("/sys/fs/cgroup/docker") / container_id)
    for folder in v2:
        stat = folder / "cpu.stat"
        if stat.exists():
            fields = dict(line.split() for line in stat.read_text().splitlines() if line.strip())
            return int(fields["usage_usec"]) / 1e6
    return None


def node_cpu(ids: list[str]) -> float | None:
    """CPU seconds used so far by all the containers' processes; None where cgroups cannot be read."""
    total = 0.0
    for container_id in ids:
        used = _cgroup_usage(container_id)
        if used is None:
            return None
        total += used
    return total


def relay_pids(ports: list[int]) -> list[int]:
    """The docker-proxy processes relaying ``ports`` on 127.0.0.1 (none when Docker relays in the kernel)."""
    wanted = {str(port) for port in ports}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [word.decode(errors="replace") for word in argv]
        if words and words[0].endswith("docker-proxy") and "-host-port" in words:
            at = words.index("-host-port") + 1
            if at < len(words) and words[at] in wanted:
                found.append(int(entry))
    return found


def relay_cpu(pids: list[int]) -> float:
    """CPU seconds used so far by the relay processes."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks


class Meter:
    """Wall time, controller CPU (this process's waited-for children), node CPU and relay CPU of one
    command, in seconds."""

    def __init__(self, ids: list[str], relays: list[int]):
        self.ids, self.relays = ids, relays

    def run(self, command: list[str], env: dict | None = None) -> tuple[dict[str, float | None], str]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        nodes, relay = node_cpu(self.ids), relay_cpu(self.relays)
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        nodes_after, relay_after = node_cpu(self.ids), relay_cpu(self.relays)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(command[0]).name} failed ({done.returncode}): {done.stdout[-600:]} {done.stderr[-600:]}")
        return {
            "wall": wall,
            "controller": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "nodes": None if nodes is None or nodes_after is None else nodes_after - nodes,
            "relay": relay_after - relay if self.relays else None,
        }, done.stdout


def gather_alone(container: str, runs: int = 20, batches: int = 5) -> float:
    """Median over ``batches`` of the node CPU (ms) of one run of the gather script, run ``runs``
    times in a row as ``mpi`` by a driver shell in ``container`` (no SSH, no controller)."""
    from provision.probe.gather import gather_script, new_nonce

    driver = 'i=0; while [ $i -lt "$2" ]; do sh "$1" </dev/null >/dev/null 2>&1; i=$((i+1)); done; times'
    subprocess.run(
        ["docker", "exec", "-i", container, "sh", "-c", "cat >/tmp/bench-gather.sh; chmod 644 /tmp/bench-gather.sh"],
        input=gather_script(new_nonce()),
        text=True,
        check=True,
    )
    empty = 'i=0; while [ $i -lt "$2" ]; do sh -c : </dev/null >/dev/null 2>&1; i=$((i+1)); done; times'

    def batch(script: str) -> float:
        out = subprocess.run(
            ["docker", "exec", "-u", "mpi", container, "sh", "-c", script, "sh", "/tmp/bench-gather.sh", str(runs)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        user, system = (_seconds(field) for field in out[1].split())
        return (user + system) * 1000 / runs

    return statistics.median(batch(driver) - batch(empty) for _ in range(batches))


def _seconds(field: str) -> float:
    minutes, rest = field.split("m")
    return int(minutes) * 60 + float(rest.rstrip("s"))


def _timed(work, *args):
    """``work(*args)`` and the CPU seconds of this whole process (every thread) while it ran."""
    started = time.process_time()
    result = work(*args)
    return result, time.process_time() - started


def controller_phases(inventory: Path, known_hosts: Path, forks: int, repeat: int = 3) -> dict[str, float]:
    """The controller's CPU per host (ms) of each phase of ``provision probe`` (best of ``repeat``,
    the phases timed in this process on the real outputs of the inventory's hosts), and of the
    command's start-up (its own process, one host that refuses the connection)."""
    from provision.facts import derive
    from provision.inventory.model import open_inventory
    from provision.probe.gather import REMOTE_COMMAND, gather_script, new_nonce, split_output
    from provision.probe.report import results_json
    from provision.probe.run import facts_from_captures
    from provision.probe.service import save_all
    from provision.transport.connection import run_command
    from provision.transport.options import SshOptions
    from provision.transport.parallel import fan_out

    hosts = list(open_inventory(inventory).hosts.values())
    options = SshOptions(known_hosts=known_hosts, ssh_config=Path("/dev/null"))
    nonce = new_nonce()
    with ThreadPoolExecutor(forks) as pool:  # the real outputs, untimed
        outputs = list(pool.map(lambda host: run_command(host, REMOTE_COMMAND, options, stdin=gather_script(nonce)), hosts))
    names = [host.name for host in hosts]
    phases: dict[str, list[float]] = {"threads": [], "framing": [], "parsing": [], "json": [], "saving": []}

    def split_all():
        return [split_output(output.stdout, nonce, output.stderr) for output in outputs]

    def derive_all(captures):
        derive._parsed_hwloc.cache_clear()  # each host's XML parsed, as in a real run
        return [facts_from_captures(name, found) for name, found in zip(names, captures, strict=True)]

    for _ in range(repeat):
        phases["threads"].append(_timed(fan_out, hosts, _name, forks, None, None, 1)[1])
        captures, seconds = _timed(split_all)
        phases["framing"].append(seconds)
        results, seconds = _timed(derive_all, captures)
        phases["parsing"].append(seconds)
        phases["json"].append(_timed(results_json, results)[1])
        with tempfile.TemporaryDirectory(prefix="provision-bench-facts.") as folder:
            phases["saving"].append(_timed(save_all, Path(folder), results)[1])
    per_host = {name: 1000 * min(values) / len(hosts) for name, values in phases.items()}
    per_host["start-up"] = 1000 * start_up_cpu(repeat)  # the whole command's, once per run (not per host)
    return per_host


def _name(host) -> str:
    return host.name


def start_up_cpu(repeat: int = 3) -> float:
    """CPU seconds of a ``provision probe`` that starts, reads a one-host inventory, connects once
    (refused at once: nothing listens on port 1) and exits: every import and set-up a run pays once."""
    with tempfile.TemporaryDirectory(prefix="provision-bench-start.") as folder:
        inventory = Path(folder) / "hosts.yml"
        inventory.write_text("hosts:\n  refused: {address: 127.0.0.1, port: 1, user: mpi}\n")
        known = Path(folder) / "known_hosts"
        known.write_text("")
        command = [tool("provision"), "probe", "-i", str(inventory), "--known-hosts", str(known), "--no-save", "--json"]
        seconds = []
        for _ in range(repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(command, capture_output=True, cwd=folder)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            seconds.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return min(seconds)
