#!/usr/bin/env python3
"""Benchmark: `provision probe` vs Ansible run as fast as its users run it, vs Fabric.

Starts N real sshd containers (the test image), then times, on the same hosts in one run:
  provision       `provision probe -i INV --forks N --json --no-save` (CLI, strict host keys)
  ansible-cold    `ansible all -m setup -a gather_subset=hardware -f N` (ansible-core) with
                  Ansible's fastest settings: its default ControlPersist (ControlMaster=auto,
                  ControlPersist=60s) and `pipelining = True` (an ansible.cfg in a temp dir);
                  a fresh ControlPath folder for each run, so every connection is new
  ansible-warm    the same command again at once, reusing the control masters the cold run
                  left behind (ControlPersist warmed by that first run): no SSH handshakes
  fabric-gather   fabric.ThreadingGroup(...).run() of provision's own gather script: the same
                  remote work, one connection per host, no parsing, no host-key checks
  fabric-hostname the same with `hostname`: the floor for an SSH fan-out from Python
Every run must reach every host: provision's JSON (status ok per host), Ansible's one-line
output (`host | SUCCESS` and ansible_hostname = host per host) and Fabric's results (exit 0,
and the host's own name in its output) are checked, and the counts printed. Each is run
--repeat times after one warm-up run, the tools in turn within each round (the load moves
between rounds, not between the tools of a round); medians are reported, with the ratios of
the medians and the median of each round's own ratio. Needs root (Docker).

Beside the wall time (issue 37), per host and tool: the controller's CPU (the tool's processes),
the nodes' CPU (the containers' cgroups: sshd, the shell, the gather) and the relay's (the
docker-proxy processes every packet passes through here); the node-side gather alone (the
script's CPU on one node, no SSH), and the controller's phases of a probe (threads, splitting
the framed output, parsing, the --json document, saving the facts; start-up once per run),
timed on this run's nodes (bench/probe_phases.py). The date, commit and load come first.

    python3 bench/probe_vs_ansible.py --sizes 16 64 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from console import tool  # noqa: E402
from probe_phases import Meter, container_ids, controller_phases, gather_alone, relay_pids, run_header  # noqa: E402
from sshd_nodes import node_names, start_nodes, stop_nodes  # noqa: E402

from cluster_support import ensure_docker  # noqa: E402

LABELS = ("provision", "ansible-cold", "ansible-warm", "fabric-gather", "fabric-hostname")


# argv: key, "gather"|"hostname", then name=port pairs. Prints {name: true/false} (reached, right host).
FABRIC_SCRIPT = """
import json, sys, fabric
from provision.probe.gather import gather_script, new_nonce, split_output
key, what, pairs = sys.argv[1], sys.argv[2], [p.split("=") for p in sys.argv[3:]]
conns = {
    name: fabric.Connection("127.0.0.1", user="mpi", port=int(port), connect_kwargs={"key_filename": [key]})
    for name, port in pairs
}
nonce = new_nonce()
command = gather_script(nonce) if what == "gather" else "hostname"
results = fabric.ThreadingGroup.from_connections(list(conns.values())).run(command, hide=True, warn=True)
by_port = {c.port: name for name, c in conns.items()}
def right(name, result):
    if result.exited != 0:
        return False
    if what == "hostname":
        return result.stdout.strip() == name
    return split_output(result.stdout, nonce)["hostname"].stdout.strip() == name
print(json.dumps({by_port[c.port]: right(by_port[c.port], r) for c, r in results.items()}))
"""


def reached_provision(stdout: str, names: list[str]) -> int:
    """Hosts provision's JSON reports as ok, each under its own name."""
    hosts = json.loads(stdout)["hosts"]
    return sum(1 for h in hosts if h["host"] in names and h["status"] == "ok" and h["facts"]["hostname"] == h["host"])


def reached_ansible(stdout: str, names: list[str]) -> int:
    """Hosts with ``name | SUCCESS => {...}`` whose facts say ansible_hostname = name (one-line output, -o)."""
    ok = set()
    for line in stdout.splitlines():
        name, sep, rest = line.partition(" | SUCCESS => ")
        if sep and name in names and json.loads(rest)["ansible_facts"].get("ansible_hostname") == name:
            ok.add(name)
    return len(ok)


def reached_fabric(stdout: str, names: list[str]) -> int:
    """Hosts Fabric reached that answered with their own name."""
    return sum(1 for name, right in json.loads(stdout).items() if right and name in names)


def write_ansible_files(work: Path, ports: dict[str, int], key: Path) -> tuple[Path, Path]:
    inventory = work / "ansible.ini"
    inventory.write_text(
        "[all]\n"
        + "".join(f"{n} ansible_host=127.0.0.1 ansible_port={p}\n" for n, p in ports.items())
        + f"[all:vars]\nansible_user=mpi\nansible_ssh_private_key_file={key}\nansible_python_interpreter=/usr/bin/python3\n"
    )
    config = work / "ansible.cfg"
    # ssh_args: Ansible's own default (-C -o ControlMaster=auto -o ControlPersist=60s) plus our known_hosts.
    config.write_text(
        "[defaults]\nhost_key_checking = True\n"
        f"local_tmp = {work / 'ansible-tmp'}\n"
        "[ssh_connection]\npipelining = True\n"
        f"ssh_args = -C -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile={work / 'known_hosts'}\n"
    )
    return inventory, config


def close_masters(folder: Path) -> None:
    """Stop the SSH control masters whose sockets are in ``folder`` (as ControlPersist's expiry would)."""
    for socket_path in folder.iterdir():
        subprocess.run(["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "bench"], capture_output=True)


def bench_size(count: int, repeat: int, work: Path) -> tuple[dict[str, list[dict]], dict[str, int], dict]:
    """Every timed run's figures by tool, the hosts each tool reached, and the node-side and
    controller-side breakdown of provision's probe."""
    names, ports, key, _known = start_nodes("bench", count, work)
    meter = Meter(container_ids(names), relay_pids(list(ports.values())))

    def run(command: list[str], env: dict | None = None) -> tuple[dict, str]:
        return meter.run(command, env)

    try:
        inventory = work / "hosts.yml"
        inventory.write_text(
            "defaults: {user: mpi, key: "
            + str(key)
            + "}\nhosts:\n"
            + "".join(f"  {n}: {{address: 127.0.0.1, port: {p}}}\n" for n, p in ports.items())
        )
        ansible_inventory, ansible_cfg = write_ansible_files(work, ports, key)
        ansible_base = {**os.environ, "ANSIBLE_CONFIG": str(ansible_cfg), "ANSIBLE_NOCOLOR": "1", "LC_ALL": "C.UTF-8"}
        control_dirs = iter(range(10**6))
        current_dir = {"path": None}

        def ansible(fresh: bool) -> tuple[float, str]:
            if fresh or current_dir["path"] is None:  # cold: a new ControlPath folder, no master exists
                current_dir["path"] = work / f"cp{next(control_dirs)}"
                current_dir["path"].mkdir()
            env = {**ansible_base, "ANSIBLE_SSH_CONTROL_PATH_DIR": str(current_dir["path"])}
            return run(
                [
                    tool("ansible"),
                    "all",
                    "-i",
                    str(ansible_inventory),
                    "-m",
                    "setup",
                    "-a",
                    "gather_subset=hardware",
                    "-f",
                    str(count),
                    "-o",
                ],
                env=env,
            )

        pairs = [f"{n}={p}" for n, p in ports.items()]
        runs = {
            "provision": (
                lambda: run(
                    [
                        tool("provision"),
                        "probe",
                        "-i",
                        str(inventory),
                        "--known-hosts",
                        str(work / "known_hosts"),
                        "--forks",
                        str(count),
                        "--json",
                        "--no-save",
                    ]
                ),
                reached_provision,
            ),
            "ansible-cold": (lambda: ansible(fresh=True), reached_ansible),
            "ansible-warm": (lambda: ansible(fresh=False), reached_ansible),  # right after ansible-cold: masters alive
            "fabric-gather": (lambda: run([sys.executable, "-c", FABRIC_SCRIPT, str(key), "gather", *pairs]), reached_fabric),
            "fabric-hostname": (lambda: run([sys.executable, "-c", FABRIC_SCRIPT, str(key), "hostname", *pairs]), reached_fabric),
        }
        figures: dict[str, list[dict]] = {label: [] for label in LABELS}
        reached: dict[str, int] = {label: count for label in LABELS}
        for round_ in range(repeat + 1):  # round 0 is the warm-up (page cache, byte-compiling), not counted
            for label in LABELS:
                make, check = runs[label]
                measured, stdout = make()
                got = check(stdout, names)
                reached[label] = min(reached[label], got)
                if round_:
                    figures[label].append(measured | {"load": os.getloadavg()[0]})
                if label == "ansible-warm":
                    close_masters(current_dir["path"])  # untimed: no idle masters linger into the next runs
        breakdown = controller_phases(inventory, work / "known_hosts", count)
        breakdown["gather alone"] = gather_alone(node_names("bench", count)[0])
        return figures, reached, breakdown
    finally:
        stop_nodes("bench", count)


def _median(runs: list[dict], key: str) -> float | None:
    values = [run[key] for run in runs if run[key] is not None]
    return statistics.median(values) if values else None


def report(count: int, figures: dict[str, list[dict]], reached: dict[str, int], breakdown: dict) -> None:
    """The table of one size: per tool the medians (wall, and per host the CPU of the controller,
    the nodes and the relay), then the ratios and provision's breakdown."""
    print(f"  {'tool':<16} {'wall s':>7} {'ctl ms/h':>9} {'nodes ms/h':>11} {'relay ms/h':>11}  reached")
    for label in LABELS:
        runs = figures[label]
        cells = [f"{_median(runs, 'wall'):>7.2f}"]
        for key, width in (("controller", 9), ("nodes", 11), ("relay", 11)):
            value = _median(runs, key)
            cells.append(f"{1000 * value / count:>{width}.1f}" if value is not None else f"{'n/a':>{width}}")
        print(f"  {label:<16} {' '.join(cells)}  {reached[label]}/{count}")

    def ratio(top: str, bottom: str) -> str:
        of_medians = _median(figures[top], "wall") / _median(figures[bottom], "wall")
        per_round = statistics.median(a["wall"] / b["wall"] for a, b in zip(figures[top], figures[bottom], strict=True))
        return f"{of_medians:>5.2f}x (median of each round's ratio {per_round:.2f}x)"

    print(f"  provision / fabric-hostname (the floor; goal <= 1.3x)  {ratio('provision', 'fabric-hostname')}")
    print(f"  ansible-cold / provision (goal >= 8x)                  {ratio('ansible-cold', 'provision')}")
    print(f"  ansible-warm / provision                               {ratio('ansible-warm', 'provision')}")
    print(f"  provision / fabric-gather (the same remote work)       {ratio('provision', 'fabric-gather')}")
    nodes = {label: _median(figures[label], "nodes") for label in ("provision", "fabric-hostname")}
    if None not in nodes.values():
        extra = 1000 * (nodes["provision"] - nodes["fabric-hostname"]) / count
        print(f"  node side: the gather costs {extra:.1f} ms of node CPU per host over the floor's login + hostname;")
    print(f"             the gather script alone on one node (no SSH) {breakdown['gather alone']:.1f} ms of CPU per run")
    print(
        "  controller, provision's phases per host (this process, this run's outputs): "
        + ", ".join(f"{name} {breakdown[name]:.2f} ms" for name in ("threads", "framing", "parsing", "json", "saving"))
        + f"; start-up {breakdown['start-up']:.0f} ms per run ({breakdown['start-up'] / count:.1f} ms per host here)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not Path(tool("ansible")).exists():
        sys.exit("ansible-core is needed: pip install '.[bench]'")
    ensure_docker()
    # As installed: pip compiles a wheel's modules; with this set (a CI image's habit) every run of
    # provision and Fabric would compile provision's modules from source again.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    print(run_header("provision probe against Ansible's setup and Fabric on the same sshd containers"))
    print(f"medians of {args.repeat} rounds; 'reached' = hosts every run of that tool reached and read correctly")
    for count in args.sizes:
        load_before = os.getloadavg()[0]
        with tempfile.TemporaryDirectory(prefix="provision-bench.") as tmp:
            figures, reached, breakdown = bench_size(count, args.repeat, Path(tmp))
        loads = [run["load"] for runs in figures.values() for run in runs]
        print(
            f"\n{count} hosts (1-min load average {load_before:.1f} before, {min(loads):.1f}-{max(loads):.1f} during, "
            f"{os.getloadavg()[0]:.1f} after; {os.cpu_count()} CPUs: all containers and tools share them)"
        )
        report(count, figures, reached, breakdown)
        sys.stdout.flush()
        if any(reached[label] != count for label in LABELS):
            sys.exit(f"not every tool reached every host at {count} hosts: {reached}")
    print("\ngoals (issue 37, item 2): at 64 hosts provision <= 1.3x Fabric's `hostname` fan-out and >= 8x Ansible (cold)")


if __name__ == "__main__":
    main()
