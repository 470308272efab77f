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
Each tool runs as its own process, the three in turn within each round (--repeat rounds, medians
printed); its wall time and its CPU (user+sys of it and every process it waited for:
getrusage(RUSAGE_CHILDREN) deltas) are printed, CPU divided by the host count, with the ratios
(of the medians, and the median of each round's own ratio), and the nodes' CPU per host (the
containers' cgroups). Where provision's controller time goes is printed for each size (issue
37, item 3; bench/probe_phases.py): its start-up (once per run), the fan-out's threads,
splitting the framed output, parsing, the --json document, all timed on the same nodes' real
outputs, and what is left: SSH (paramiko's handshake, channel and packets), which the bare
paramiko fan-out pays too; saving the facts is printed beside (this bench runs --no-save, as
the other tools save nothing). Every tool must reach every host (checked). The containers are
removed at the end, also on Ctrl-C. Needs root (Docker) and `pip install '.[bench]'`
(ClusterShell).

    python3 bench/probe_scale.py --sizes 16 64 128 256 --forks 64 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from console import tool  # noqa: E402
from probe_phases import Meter, container_ids, controller_phases, relay_pids, run_header  # noqa: E402

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


def run_tools(nodes: Nodes, count: int, forks: int, workers: str) -> dict[str, dict]:
    """One round: provision, the bare paramiko fan-out and clush on the first ``count`` nodes, each
    checked to reach every host; each tool's wall, controller CPU and nodes' CPU (seconds)."""
    paths = nodes.files(count)
    names = nodes.names[:count]
    ports = [str(nodes.ports[n]) for n in names]
    meter = Meter(container_ids(names), relay_pids([nodes.ports[n] for n in names]))
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

    figures, out = meter.run(
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
    results["provision"] = figures

    figures, out = meter.run(
        [sys.executable, "-c", PARAMIKO_SCRIPT, str(nodes.key), str(paths["known_hosts"]), str(forks), *ports]
    )
    assert int(out) == count, f"paramiko reached {out.strip()}/{count} hosts"
    results["paramiko"] = figures

    figures, out = meter.run(
        [tool("clush"), "-f", str(forks), "-o", f"-F {paths['ssh_config']}", "-S", "-w", ",".join(names), "--", script]
    )
    reached = {line.split(":", 1)[0] for line in out.splitlines()} & set(names)
    assert reached == set(names), f"clush reached {len(reached)}/{count} hosts"
    results["clush"] = figures
    return results


def where_the_time_goes(nodes: Nodes, count: int, forks: int, provision_cpu: float, paramiko_cpu: float) -> str:
    """provision's controller CPU per host, phase by phase (bench/probe_phases.py), the rest SSH;
    beside it the bare paramiko fan-out's, whose start-up is its interpreter and imports."""
    paths = nodes.files(count)
    phases = controller_phases(paths["hosts.yml"], paths["known_hosts"], min(forks, count))
    total = 1000 * provision_cpu / count
    start = phases["start-up"] / count
    measured = ("threads", "framing", "parsing", "json")
    rest = total - start - sum(phases[name] for name in measured)
    return (
        f"  provision {total:.1f} ms/host = start-up {start:.1f} ({phases['start-up']:.0f} ms per run) + "
        + " + ".join(f"{name} {phases[name]:.2f}" for name in measured)
        + f" + SSH and the rest {rest:.1f}; saving the facts (not in this run) {phases['saving']:.2f} ms/host"
        + f"\n  paramiko  {1000 * paramiko_cpu / count:.1f} ms/host (its start-up: the interpreter, paramiko, the script)"
    )


def _median(values: list) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def _per_host(seconds: float | None, count: int) -> str:
    return f"{1000 * seconds / count:.1f}" if seconds is not None else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 128, 256])
    parser.add_argument("--forks", type=int, default=64, help="hosts in flight, every tool (default 64)")
    parser.add_argument("--workers", default="0", help="provision's --workers (default 0: automatic)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per size (default 3); medians are printed")
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
            print(run_header(f"provision probe against a bare paramiko fan-out and clush, forks {args.forks}"))
            print("CPU = user+sys of the tool's processes per host (start-up included); nodes = the containers' CPU per host")
            print(
                f"{'hosts':>5} {'load':>5} | {'provision s':>11} {'ms/host':>7} {'nodes':>6} | {'paramiko s':>10} {'ms/host':>7} "
                f"{'nodes':>6} | {'clush s':>7} {'ms/host':>7} | {'prov/paramiko wall':>18} {'CPU':>6} | {'prov/clush':>10}"
            )
            totals = {}  # size -> {tool: CPU seconds}
            for count in sorted(args.sizes):
                nodes.grow(count)
                load = os.getloadavg()[0]
                runs = [run_tools(nodes, count, args.forks, args.workers) for _ in range(args.repeat)]
                r = {name: {key: _median([run[name][key] for run in runs]) for key in runs[0][name]} for name in runs[0]}
                ms = {name: 1000 * r[name]["controller"] / count for name in r}
                node_ms = {name: _per_host(r[name]["nodes"], count) for name in r}
                wall = statistics.median(run["provision"]["wall"] / run["paramiko"]["wall"] for run in runs)
                cpu = statistics.median(run["provision"]["controller"] / run["paramiko"]["controller"] for run in runs)
                totals[count] = {name: r[name]["controller"] for name in r}
                print(
                    f"{count:>5} {load:>5.1f} | "
                    f"{r['provision']['wall']:>11.2f} {ms['provision']:>7.1f} {node_ms['provision']:>6} | "
                    f"{r['paramiko']['wall']:>10.2f} {ms['paramiko']:>7.1f} {node_ms['paramiko']:>6} | "
                    f"{r['clush']['wall']:>7.2f} {ms['clush']:>7.1f} | {wall:>17.2f}x {cpu:>5.2f}x | "
                    f"{r['provision']['wall'] / r['clush']['wall']:>9.2f}x",
                    flush=True,
                )
                print(where_the_time_goes(nodes, count, args.forks, r["provision"]["controller"], r["paramiko"]["controller"]))
            sizes = sorted(totals)
            for small, big in zip(sizes, sizes[1:], strict=False):  # start-up cost cancels out: the cost of one more host
                slope = {name: 1000 * (totals[big][name] - totals[small][name]) / (big - small) for name in totals[big]}
                print(f"marginal CPU per host {small}->{big}: " + ", ".join(f"{n} {v:.1f} ms" for n, v in slope.items()))
            print(f"load average at the end {os.getloadavg()[0]:.1f}")
            print(
                "goals (issue 37, item 3): at 128 hosts provision's CPU per host <= 1.2x the bare paramiko fan-out's "
                "(start-up included), its wall <= 1.1x (ratios: median of each round's own)"
            )
        finally:
            nodes.close()


if __name__ == "__main__":
    main()
