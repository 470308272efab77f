"""MPI nodes for the launch-at-scale proof: N sshd containers of a test node image on their own network.

Test infrastructure (used by tests/test_mpirun_cluster.py and bench/launch_scale.py); nothing
here stands in for provision's own code.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cluster_support import wait_for_ssh, write_ed25519


def start_mpi_nodes(
    prefix: str, count: int, image: str, work: Path, mesh: bool, volumes: tuple[str, ...] = ()
) -> tuple[list[str], dict[str, int]]:
    """``count`` nodes ``<prefix>NNN`` of ``image`` on network ``<prefix>net``, user ``mpi``; host keys
    made here, so both the controller's and the nodes' known_hosts are exact. Only the first node
    holds mpi's private key (``mesh``: every node does). ``volumes``: more ``docker run -v`` mounts
    on every node (test stand-ins). Writes ``work``/hosts.yml (the inventory) and
    ``work``/known_hosts; returns the names and {name: published port}."""
    key = work / "id_ed25519"
    public = write_ed25519(key, "bench-mpi")
    (work / "authorized_keys").write_text(public + "\n")
    names = [f"{prefix}{i:03d}" for i in range(count)]
    host_lines = []
    for name in names:
        host_key = work / name / "ssh_host_ed25519_key"
        host_lines.append(f"{name} {write_ed25519(host_key, name)}\n")
    (work / "ssh_known_hosts").write_text("".join(host_lines))
    subprocess.run(["docker", "network", "create", f"{prefix}net"], check=True, capture_output=True)

    extra = list(volumes)

    def run(index_name: tuple[int, str]) -> None:
        index, name = index_name
        volumes = [
            f"{work}/{name}:/cluster/host:ro",
            f"{work}/authorized_keys:/cluster/authorized_keys:ro",
            f"{work}/ssh_known_hosts:/cluster/ssh_known_hosts:ro",
        ]
        if mesh or index == 0:
            volumes.append(f"{key}:/cluster/mpi_key:ro")
        volumes += extra
        command = ["docker", "run", "-d", "--rm", "--init", "--name", name, "--hostname", name, "--network", f"{prefix}net"]
        for volume in volumes:
            command += ["-v", volume]
        subprocess.run([*command, "-p", "127.0.0.1::22", image], check=True, capture_output=True)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(run, enumerate(names)))
    ports = {}
    for name in names:
        out = subprocess.run(["docker", "port", name, "22"], check=True, capture_output=True, text=True).stdout
        ports[name] = int(out.splitlines()[0].rsplit(":", 1)[1])
    wait_for_ssh(ports, timeout=600)
    (work / "known_hosts").write_text(
        "".join(f"[127.0.0.1]:{ports[n]} {' '.join(line.split()[1:3])}\n" for n, line in zip(names, host_lines, strict=True))
    )
    inventory = ["defaults:", "  user: mpi", f"  key: {key}", "hosts:"]
    inventory += [f"  {n}: {{address: 127.0.0.1, port: {ports[n]}}}" for n in names]
    (work / "hosts.yml").write_text("\n".join(inventory) + "\n")
    return names, ports


def stop_mpi_nodes(prefix: str, count: int) -> None:
    """Remove the nodes (also half-started ones) and their network."""
    subprocess.run(["docker", "rm", "-f", *[f"{prefix}{i:03d}" for i in range(count)]], capture_output=True)
    subprocess.run(["docker", "network", "rm", f"{prefix}net"], capture_output=True)
