#!/usr/bin/env python3
"""Benchmark: the controller at 1024 and 4096 hosts, simulated (issue 37, item 4).

Stands up the largest size of simulated SSH nodes on this machine (bench/sim_nodes.py: asyncssh
processes on loopback addresses 127.1.x.y, one address and one ed25519 host key per host,
answering from real captures), then at each size runs, each as its own process against the first
N of them:

  probe (new keys)  `provision probe --accept-new-host-keys` with an empty known_hosts: every key
                    learned and appended, every host's facts and captures saved
  probe             the same again, host keys checked against what the first run wrote
  setup             `provision setup-cluster --tags users --no-verify`, the simulated nodes already
                    converged (they answer from a real node's no-change round trip and refuse any
                    change): one round trip per host, host records written to the cache folder
  setup-again       (with --runs) the same again, the cache folder read back

and prints, for each: the wall time, the controller's CPU per host (user+sys of the provision
process and every process it waited for, from wait4), its peak RSS, its peak open file
descriptors and threads (sampled every 50 ms from /proc), the CPU the simulated nodes used in
the same time (they share the machine's cores with the controller: measured apart, from
/proc/PID/stat of the server processes), the size of known_hosts, the facts folder and the cache
folder, and how long the output was (lines and bytes of stdout and stderr; stderr is a pseudo
terminal, as for a user at a shell, so progress bars and live displays run). Every run must
exit 0 and cost one round trip per host (the nodes count the scripts they answered, and refuse
any change), and a probe must save every host's facts.

The controller starts with RLIMIT_NOFILE's soft limit at --nofile (default 1024, the usual
default of a login session and of systemd services), its hard limit as this shell's.

    python3 bench/scale_4096.py --sizes 1024 4096
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import resource
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from console import tool  # noqa: E402
from sim_nodes import PROBE_CAPTURES, ROUND_TRIPS, SimCluster  # noqa: E402

RUN_LIMIT = 300  # seconds one provision run may take before it is stopped (and reported)
RUNS = ["probe-new", "probe", "setup", "setup-again"]


@dataclass
class Measured:
    """One provision run."""

    exit_code: int
    wall: float
    cpu: float  # user+sys of the process and its waited-for children
    max_rss_kib: int
    fds: int  # peak open descriptors (sampled)
    threads: int  # peak threads (sampled)
    server_cpu: float
    stdout: bytes
    terminal: bytes  # what went to the pseudo terminal (stderr)


def _sample(pid: int, peaks: dict, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            peaks["fds"] = max(peaks["fds"], len(os.listdir(f"/proc/{pid}/fd")))
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("Threads:"):
                    peaks["threads"] = max(peaks["threads"], int(line.split()[1]))
        except (OSError, ValueError):
            pass
        stop.wait(0.05)


def measure(command: list[str], nofile: int, cluster: SimCluster, cwd: Path) -> Measured:
    """Run ``command`` with stdout on a pipe and stderr on a pseudo terminal (200x50)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(nofile, hard), hard))

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as installed: bytecode cached
    env["TERM"] = "xterm-256color"
    terminal = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            terminal.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    server_before = cluster.server_cpu()
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, cwd=cwd, env=env, preexec_fn=limits
    )
    os.close(slave)
    peaks, stop = {"fds": 0, "threads": 0}, threading.Event()
    sampler = threading.Thread(target=_sample, args=(process.pid, peaks, stop), daemon=True)
    sampler.start()
    out = bytearray()
    out_reader = threading.Thread(target=lambda: out.extend(process.stdout.read()), daemon=True)
    out_reader.start()
    timer = threading.Timer(RUN_LIMIT, process.kill)
    timer.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    sampler.join()
    out_reader.join()
    reader.join(timeout=5)
    os.close(master)
    return Measured(
        process.returncode,
        wall,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss,
        peaks["fds"],
        peaks["threads"],
        cluster.server_cpu() - server_before,
        bytes(out),
        bytes(terminal),
    )


def folder_size(path: Path) -> tuple[int, int]:
    """(files, bytes) below ``path``."""
    files = size = 0
    for folder, _dirs, names in os.walk(path):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(folder, name)).st_size
    return files, size


def lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()


def loads() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def print_header(args, setup_args: list[str]) -> None:
    modified = " (modified)" if git("status", "--porcelain", "--untracked-files=no") else ""
    captures = args.probe_captures.relative_to(ROOT) if args.probe_captures.is_relative_to(ROOT) else args.probe_captures
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}, commit {git('rev-parse', '--short', 'HEAD')}{modified}, "
        f"{len(os.sched_getaffinity(0))} cores, load average {loads()}\n"
        f"controller: {tool('provision')}, --forks {args.forks}, RLIMIT_NOFILE soft {args.nofile} "
        f"hard {resource.getrlimit(resource.RLIMIT_NOFILE)[1]}, stderr on a pseudo terminal, "
        f"known_hosts {'hashed' if args.hash_known_hosts else 'plain'}\n"
        f"nodes answer from {captures} (probe) and {ROUND_TRIPS.relative_to(ROOT)} (setup-cluster {' '.join(setup_args)})\n"
        "CPU: of the provision process and the processes it waited for (wait4), per host; the nodes' CPU in the same "
        "time, measured apart (they share the cores); peak fds and threads: the provision process, sampled every 50 ms",
        flush=True,
    )


def run_size(args, cluster: SimCluster, size: int, folder: Path, capture: dict, setup_args: list[str]) -> None:
    """Every run of ``args.runs`` on the first ``size`` nodes: one row each, then the folders' sizes."""
    folder.mkdir()
    inventory, known, facts = folder / "hosts.yml", folder / "known_hosts", folder / "facts"
    cluster.write_inventory(inventory, size, users=capture["cluster_users"])
    provision = [tool("provision")]
    ssh_config = folder / "ssh_config"  # --hash-known-hosts: new keys written hashed, as Debian's ssh_config has it
    ssh_config.write_text("Host *\n  HashKnownHosts yes\n" if args.hash_known_hosts else "")
    common = ["-i", str(inventory), "--known-hosts", str(known), "--ssh-config", str(ssh_config), "--forks", str(args.forks)]
    runs = {
        "probe-new": [*provision, "probe", *common, "--facts-dir", str(facts), "--accept-new-host-keys"],
        "probe": [*provision, "probe", *common, "--facts-dir", str(facts)],
        "setup": [*provision, "setup-cluster", *common, *setup_args],
        "setup-again": [*provision, "setup-cluster", *common, *setup_args],
    }
    after = {}
    for name in args.runs:
        load = os.getloadavg()[0]
        before = cluster.replies()
        done = measure(runs[name], args.nofile, cluster, folder)
        answered = cluster.replies() - before
        verdict = "ok" if done.exit_code == 0 else f"EXIT {done.exit_code}"
        kind = "gather" if name.startswith("probe") else "setup"
        if dict(answered) != {kind: size}:  # one round trip per host, each answered from the capture
            verdict += f", nodes answered {dict(answered)} (expected {kind}: {size})"
        saved = len(list(facts.glob("*.json")))
        if name.startswith("probe") and saved != size:
            verdict += f", facts saved for {saved}/{size}"
        print(
            f"{size:>5} {name:<12} {load:>5.1f} {done.wall:>7.1f} {1000 * done.cpu / size:>11.1f} "
            f"{1000 * done.server_cpu / size:>13.1f} {done.max_rss_kib / 1024:>12.0f} {done.fds:>8} "
            f"{done.threads:>7} {lines(done.stdout):>12} {len(done.terminal):>9}  {verdict}",
            flush=True,
        )
        if done.exit_code != 0:
            print(f"      output's end: {(done.stdout[-600:] + b' | ' + done.terminal[-600:]).decode(errors='replace')!r}")
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / f"{size}-{name}.stdout").write_bytes(done.stdout)
            (args.keep / f"{size}-{name}.tty").write_bytes(done.terminal)
        after[name] = (
            known.stat().st_size if known.exists() else 0,
            folder_size(facts),
            folder_size(folder / ".provision-cache"),
        )
    for name, (known_size, (files, size_bytes), (cache_files, cache_bytes)) in after.items():
        print(
            f"      after {name:<12} known_hosts {known_size / 1024:.0f} KiB, facts folder {files} files "
            f"{size_bytes / 2**20:.1f} MiB, cache folder {cache_files} files {cache_bytes / 2**20:.1f} MiB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--forks", type=int, default=64, help="provision's --forks (default 64, its default)")
    parser.add_argument("--nofile", type=int, default=1024, help="the controller's RLIMIT_NOFILE soft limit (default 1024)")
    parser.add_argument("--seconds", type=float, default=600, help="the simulated nodes stop after this long (default 600)")
    parser.add_argument("--probe-captures", type=Path, default=PROBE_CAPTURES)
    parser.add_argument("--keep", type=Path, help="copy each run's output there (stdout, terminal)")
    parser.add_argument(
        "--hash-known-hosts", action="store_true", help="known_hosts written hashed (HashKnownHosts yes) and read back so"
    )
    parser.add_argument("--runs", nargs="+", choices=RUNS, default=RUNS[:3], help=f"default: {' '.join(RUNS[:3])}")
    args = parser.parse_args()
    capture = json.loads(ROUND_TRIPS.read_text())
    setup_args = [a for a in capture["setup_args"] if a != "--json"]  # the output a user reads, measured
    print_header(args, setup_args)
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="provision-4096.") as tmp,
        SimCluster(Path(tmp), max(args.sizes), args.seconds, probe_captures=args.probe_captures) as cluster,
    ):
        print(
            f"{max(args.sizes)} simulated nodes on 127.1.x.y:{cluster.port} in {len(cluster.processes)} processes, "
            f"started in {cluster.startup_seconds:.1f} s\n"
            f"{'hosts':>5} {'run':<12} {'load':>5} {'wall s':>7} {'ms CPU/host':>11} {'nodes ms/host':>13} "
            f"{'peak RSS MiB':>12} {'peak fds':>8} {'threads':>7} {'stdout lines':>12} {'tty bytes':>9}  result",
            flush=True,
        )
        for size in sorted(args.sizes):
            run_size(args, cluster, size, Path(tmp) / f"n{size}", capture, setup_args)
    print(f"the whole bench {time.monotonic() - started:.0f} s; load average at the end {loads()}", flush=True)


if __name__ == "__main__":
    main()
