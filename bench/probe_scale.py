#!/usr/bin/env python3
"""Benchmark: the controller's cost of `provision probe` as the cluster grows (issue 9).

Starts up to the largest size of plain sshd containers (the test image provision-node:test, one
shared ed25519 host key, sshd on random 127.0.0.1 ports), then at each size (16 64 128 256 by
default), on the same hosts, runs the same gather script with:
  provision : `provision probe --forks F --json --no-save` (CLI, strict host keys, worker
              processes above its threshold: --workers auto)
  paramiko  : a bare script: F threads, SSHClient.connect + exec_command + read (strict host
              keys from the same known_hosts) - the floor for Python SSH
  clush     : ClusterShell `clush -f F` (one OpenSSH subprocess per host, same key/known_hosts)
Each tool runs as its own process; its wall time and its CPU (user+sys of it and every process
it waited for: getrusage(RUSAGE_CHILDREN) deltas) are printed, CPU divided by the host count,
with the ratios. Every tool must reach every host (checked). The containers are removed at the
end, also on Ctrl-C. Needs root (Docker) and `pip install '.[bench]'` (ClusterShell).

    python3 bench/probe_scale.py --sizes 16 64 128 256 --forks 64
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from console import tool  # noqa: E402

from cluster_support import ensure_docker, wait_for_ssh, write_ed25519  # noqa: E402

IMAGE = os.environ.get("PROVISION_NODE_IMAGE", "provision-node:test")

# The paramiko floor: what a hand-written fan-out does, with host keys checked like provision.
PARAMIKO_SCRIPT = r"""
import sys, paramiko
from concurrent.futures import ThreadPoolExecutor
from provision.probe.gather import gather_script, new_nonce
key, known_hosts, forks = sys.argv[1], sys.argv[2], int(sys.argv[3])
ports = [int(p) for p in sys.argv[4:]]
known = paramiko.HostKeys(known_hosts)
script = gather_script(new_nonce())

def run(port):
    client = paramiko.SSHClient()
    name = f"[127.0.0.1]:{port}"
    for kind, value in known.lookup(name).items():
        client.get_host_keys().add(name, kind, value)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect("127.0.0.1", port=port, username="mpi", key_filename=key, timeout=30, allow_agent=False, look_for_keys=False)
    try:
        _, stdout, stderr = client.exec_command(script, timeout=300)
        out, _ = stdout.read(), stderr.read()
        return stdout.channel.recv_exit_status() == 0 and b"hostname" in out
    finally:
        client.close()

with ThreadPoolExecutor(forks) as pool:
    print(sum(pool.map(run, ports)))
"""


class Nodes:
    """sshd containers, started in batches, all removed by close()."""

    def __init__(self, work: Path):
        self.work = work
        self.prefix = f"provscale{os.getpid()}-"
        self.names: list[str] = []
        self.ports: dict[str, int] = {}
        self.key = work / "id_ed25519"
        (work / "authorized_keys").write_text(write_ed25519(self.key, "bench") + "\n")
        self.host_public = write_ed25519(work / "host" / "ssh_host_ed25519_key", "bench-host")

    def grow(self, count: int) -> None:
        new = [f"{self.prefix}{index:04d}" for index in range(len(self.names), count)]
        if not new:
            return
        self.names += new  # before starting: close() removes half-started ones too

        def start(name: str) -> None:
            subprocess.run(
                [
                    "docker",
                    "run",
                    "-d",
                    "--rm",
                    "--init",
                    "--name",
                    name,
                    "--hostname",
                    name,
                    "-p",
                    "127.0.0.1::22",
                    "-v",
                    f"{self.work}/authorized_keys:/cluster/authorized_keys:ro",
                    "-v",
                    f"{self.work}/host:/cluster/host:ro",
                    IMAGE,
                ],
                check=True,
                capture_output=True,
            )

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(start, new))
        fmt = '{{.Name}} {{(index (index .NetworkSettings.Ports "22/tcp") 0).HostPort}}'
        out = subprocess.run(["docker", "inspect", "-f", fmt, *new], check=True, capture_output=True, text=True).stdout
        for line in out.split("\n"):
            if line.strip():
                name, port = line.split()
                self.ports[name.lstrip("/")] = int(port)
        wait_for_ssh({n: self.ports[n] for n in new}, timeout=300)

    def close(self) -> None:
        for start in range(0, len(self.names), 64):
            subprocess.run(["docker", "rm", "-f", *self.names[start : start + 64]], capture_output=True)

    def files(self, count: int) -> dict[str, Path]:
        """Inventory, known_hosts and an OpenSSH config for the first ``count`` nodes."""
        names = self.names[:count]
        kind, data = self.host_public.split()[:2]
        paths = {name: self.work / f"{name}.{count}" for name in ("hosts.yml", "known_hosts", "ssh_config")}
        paths["known_hosts"].write_text("".join(f"[127.0.0.1]:{self.ports[n]} {kind} {data}\n" for n in names))
        paths["hosts.yml"].write_text(
            f"defaults: {{user: mpi, key: {self.key}}}\nhosts:\n"
            + "".join(f"  {n}: {{address: 127.0.0.1, port: {self.ports[n]}}}\n" for n in names)
        )
        paths["ssh_config"].write_text(
            "".join(f"Host {n}\n  HostName 127.0.0.1\n  Port {self.ports[n]}\n" for n in names)
            + f"Host *\n  User mpi\n  IdentityFile {self.key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {paths['known_hosts']}\n"  # noqa: E501 - one literal, kept whole to be read or grepped
            "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n  ControlMaster no\n"
        )
        return paths


def measured(command: list[str]) -> tuple[float, float, str]:
    """Run ``command``; return its wall seconds, the CPU seconds of it and its waited-for children, stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0,):
        raise RuntimeError(f"{Path(command[0]).name} failed ({done.returncode}): {done.stdout[-600:]} {done.stderr[-600:]}")
    return wall, cpu, done.stdout


def run_tools(nodes: Nodes, count: int, forks: int, workers: str) -> dict[str, tuple[float, float]]:
    paths = nodes.files(count)
    names = nodes.names[:count]
    ports = [str(nodes.ports[n]) for n in names]
    script = subprocess.run(
        [
            sys.executable,
            "-c",
            "from provision.probe.gather import gather_script, new_nonce; print(gather_script(new_nonce()), end='')",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    results = {}

    wall, cpu, out = measured(
        [
            tool("provision"),
            "probe",
            "-i",
            str(paths["hosts.yml"]),
            "--known-hosts",
            str(paths["known_hosts"]),
            "--ssh-config",
            "/dev/null",
            "--forks",
            str(forks),
            "--workers",
            workers,
            "--json",
            "--no-save",
        ]
    )
    ok = sum(h["status"] == "ok" for h in json.loads(out)["hosts"])
    assert ok == count, f"provision reached {ok}/{count} hosts"
    results["provision"] = (wall, cpu)

    wall, cpu, out = measured(
        [sys.executable, "-c", PARAMIKO_SCRIPT, str(nodes.key), str(paths["known_hosts"]), str(forks), *ports]
    )
    assert int(out) == count, f"paramiko reached {out.strip()}/{count} hosts"
    results["paramiko"] = (wall, cpu)

    wall, cpu, out = measured(
        [tool("clush"), "-f", str(forks), "-o", f"-F {paths['ssh_config']}", "-S", "-w", ",".join(names), "--", script]
    )
    reached = {line.split(":", 1)[0] for line in out.splitlines()} & set(names)
    assert reached == set(names), f"clush reached {len(reached)}/{count} hosts"
    results["clush"] = (wall, cpu)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 128, 256])
    parser.add_argument("--forks", type=int, default=64, help="hosts in flight, every tool (default 64)")
    parser.add_argument("--workers", default="0", help="provision's --workers (default 0: automatic)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per tool and size; the median is printed")
    args = parser.parse_args()
    if not Path(tool("clush")).exists():
        sys.exit("ClusterShell is needed: pip install '.[bench]'")
    ensure_docker()
    # As installed: pip compiles a wheel's modules; with this set (a CI image's habit) every run of every
    # tool would compile provision's modules from source again (~0.1 s of CPU per start, counted per host).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still removes the containers
    with tempfile.TemporaryDirectory(prefix="provision-scale.") as tmp:
        nodes = Nodes(Path(tmp))
        try:
            nodes.grow(min(args.sizes))
            run_tools(nodes, min(args.sizes), args.forks, args.workers)  # warm-up: page cache, byte-compiling
            print(
                f"{time.strftime('%Y-%m-%d %H:%M %Z')}, forks {args.forks}, {len(os.sched_getaffinity(0))} cores, "
                f"load average {os.getloadavg()[0]:.1f}; CPU = user+sys of the tool's processes per host (start-up included)"
            )
            print(
                f"{'hosts':>5} {'load':>5} | {'provision s':>11} {'ms/host':>7} | {'paramiko s':>10} {'ms/host':>7} | "
                f"{'clush s':>7} {'ms/host':>7} | {'prov/paramiko':>13} {'prov/clush':>10}"
            )
            totals = {}  # size -> {tool: CPU seconds}
            for count in sorted(args.sizes):
                nodes.grow(count)
                load = os.getloadavg()[0]
                runs = [run_tools(nodes, count, args.forks, args.workers) for _ in range(args.repeat)]
                r = {name: tuple(statistics.median(run[name][i] for run in runs) for i in (0, 1)) for name in runs[0]}
                ms = {name: 1000 * cpu / count for name, (_, cpu) in r.items()}
                totals[count] = {name: cpu for name, (_, cpu) in r.items()}
                print(
                    f"{count:>5} {load:>5.1f} | {r['provision'][0]:>11.2f} {ms['provision']:>7.1f} | {r['paramiko'][0]:>10.2f} "
                    f"{ms['paramiko']:>7.1f} | {r['clush'][0]:>7.2f} {ms['clush']:>7.1f} | "
                    f"{r['provision'][0] / r['paramiko'][0]:>12.2f}x {r['provision'][0] / r['clush'][0]:>9.2f}x",
                    flush=True,
                )
            sizes = sorted(totals)
            for small, big in zip(sizes, sizes[1:], strict=False):  # start-up cost cancels out: the cost of one more host
                slope = {name: 1000 * (totals[big][name] - totals[small][name]) / (big - small) for name in totals[big]}
                print(f"marginal CPU per host {small}->{big}: " + ", ".join(f"{n} {v:.1f} ms" for n, v in slope.items()))
            print(f"load average at the end {os.getloadavg()[0]:.1f}")
            print("goals (issue 28): provision <= 15 ms/host at 128 and 256 hosts (total and marginal), prov/paramiko <= 1.1x")
        finally:
            nodes.close()


if __name__ == "__main__":
    main()
