#!/usr/bin/env python3
"""Benchmark: `provision probe` vs Ansible's setup module vs a bare Fabric fan-out.

Starts N real sshd containers (the test image), then times, on the same hosts in one run:
  provision : `provision probe -i INV --forks N --json --no-save` (CLI, strict host keys)
  ansible   : `ansible all -m setup -a gather_subset=hardware -f N` (ansible-core, cold SSH:
              ControlPersist off, since each provision probe is a fresh connection too)
  fabric    : a bare fabric.ThreadingGroup(...).run() of the same gather script (one
              thread per host, no parsing, no host key checks) - the floor for an SSH fan-out
Each is run --repeat times; the median is reported, with the ratios. Needs root (Docker).

    python3 bench/probe_vs_ansible.py --sizes 16 64 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from cluster_support import ensure_docker, wait_for_ssh, write_ed25519  # noqa: E402

IMAGE = os.environ.get("PROVISION_NODE_IMAGE", "provision-node:test")


def tool(name: str) -> str:
    """The console script beside this interpreter (as the fabric run uses sys.executable directly),
    not a wrapper found on PATH such as a pyenv shim, which would add its own start-up time."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name) or name

FABRIC_SCRIPT = """
import sys, fabric
from provision.gather import gather_script, new_nonce
ports = [int(p) for p in sys.argv[2:]]
conns = [fabric.Connection("127.0.0.1", user="mpi", port=p, connect_kwargs={"key_filename": [sys.argv[1]]}) for p in ports]
results = fabric.ThreadingGroup.from_connections(conns).run(gather_script(new_nonce()), hide=True, warn=True)
assert all(r.exited == 0 for r in results.values()), "a host failed"
"""


def start_nodes(count: int, work: Path) -> tuple[list[str], dict[str, int], Path]:
    key = work / "id_ed25519"
    public = write_ed25519(key, "bench")
    (work / "authorized_keys").write_text(public + "\n")
    names = [f"bench{index:03d}" for index in range(count)]
    for name in names:
        subprocess.run(
            ["docker", "run", "-d", "--rm", "--init", "--name", name, "--hostname", name, "-p", "127.0.0.1::22",
             "-v", f"{work}/authorized_keys:/cluster/authorized_keys:ro", IMAGE],
            check=True, capture_output=True,
        )
    ports = {}
    for name in names:
        out = subprocess.run(["docker", "port", name, "22"], check=True, capture_output=True, text=True).stdout
        ports[name] = int(out.splitlines()[0].rsplit(":", 1)[1])
    wait_for_ssh(ports, timeout=120)
    # Known hosts for provision and ansible (fabric auto-adds, its default).
    lines = []
    for name, port in ports.items():
        for _ in range(50):
            host_key = subprocess.run(["docker", "exec", name, "cat", "/etc/ssh/ssh_host_ed25519_key.pub"], capture_output=True, text=True)
            if host_key.returncode == 0:
                break
            time.sleep(0.1)
        kind, data = host_key.stdout.split()[:2]
        lines.append(f"[127.0.0.1]:{port} {kind} {data}\n")
    known_hosts = work / "known_hosts"
    known_hosts.write_text("".join(lines))
    return names, ports, key


def timed(command: list[str], env: dict | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({done.returncode}): {done.stdout[-800:]} {done.stderr[-800:]}")
    return elapsed


def bench_size(count: int, repeat: int, work: Path) -> dict[str, float]:
    names, ports, key = start_nodes(count, work)
    try:
        inventory = work / "hosts.yml"
        inventory.write_text(
            "defaults: {user: mpi, key: " + str(key) + "}\nhosts:\n"
            + "".join(f"  {n}: {{address: 127.0.0.1, port: {p}}}\n" for n, p in ports.items())
        )
        ansible_inventory = work / "ansible.ini"
        ansible_inventory.write_text(
            "[all]\n" + "".join(f"{n} ansible_host=127.0.0.1 ansible_port={p}\n" for n, p in ports.items())
            + f"[all:vars]\nansible_user=mpi\nansible_ssh_private_key_file={key}\nansible_python_interpreter=/usr/bin/python3\n"
        )
        ansible_env = {
            **os.environ,
            "ANSIBLE_HOST_KEY_CHECKING": "True",
            "ANSIBLE_SSH_ARGS": f"-o ControlMaster=no -o UserKnownHostsFile={work / 'known_hosts'}",
            "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"),
            "ANSIBLE_NOCOLOR": "1",
        }
        runs = {
            "provision": lambda: timed([tool("provision"), "probe", "-i", str(inventory), "--known-hosts", str(work / "known_hosts"),
                                        "--forks", str(count), "--json", "--no-save"]),
            "ansible": lambda: timed([tool("ansible"), "all", "-i", str(ansible_inventory), "-m", "setup", "-a", "gather_subset=hardware",
                                      "-f", str(count)], env=ansible_env),
            "fabric": lambda: timed([sys.executable, "-c", FABRIC_SCRIPT, str(key), *map(str, ports.values())]),
        }
        results = {}
        for label, run in runs.items():
            run()  # warm-up: page cache, first-import byte-compiling
            results[label] = statistics.median(run() for _ in range(repeat))
        return results
    finally:
        subprocess.run(["docker", "rm", "-f", *names], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not Path(tool("ansible")).exists():
        sys.exit("ansible-core is needed: pip install '.[bench]'")
    ensure_docker()
    print(f"{'hosts':>5} {'provision s':>12} {'ansible s':>10} {'fabric s':>9} {'ansible/provision':>18} {'provision/fabric':>17}")
    for count in args.sizes:
        with tempfile.TemporaryDirectory(prefix="provision-bench.") as tmp:
            r = bench_size(count, args.repeat, Path(tmp))
        print(f"{count:>5} {r['provision']:>12.2f} {r['ansible']:>10.2f} {r['fabric']:>9.2f} "
              f"{r['ansible'] / r['provision']:>17.1f}x {r['provision'] / r['fabric']:>16.2f}x", flush=True)
    print("targets: ansible/provision >= 10x; provision/fabric <= 1.3x at 64 hosts")


if __name__ == "__main__":
    main()
