"""The systemd test nodes (provision-systemd:test) are what a real server is for the roles that
start services: systemd is PID 1 and has finished booting with no failed unit, sshd is its unit
ssh.service (the very sshd provision reaches), the login user mpi may sudo without a password,
and the apt lists are empty as on a fresh node. Checked over SSH with `provision run`, as a user
would look."""

from __future__ import annotations

import json
import os

import pytest
from systemd_support import SYSTEMD_NODES, systemd_cluster

from conftest import run_cli

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    material = tmp_path_factory.mktemp("systemd")
    with systemd_cluster(f"provsystemd{os.getpid()}", material) as cluster:
        inventory = material / "hosts.yml"
        inventory.write_text(cluster.inventory_yaml(SYSTEMD_NODES))
        yield cluster, inventory, material / "known_hosts"


def _run(inventory, known, *args: str) -> dict[str, dict]:
    done = run_cli("run", "all", "-i", str(inventory), "--known-hosts", str(known), "--json", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return {r["host"]: r for r in json.loads(done.stdout)["hosts"]}


def test_each_node_booted_under_systemd_with_sshd_as_its_unit(nodes):
    _, inventory, known = nodes
    script = (
        "cat /proc/1/comm; systemctl is-system-running; systemctl --failed --no-legend --plain | wc -l; "
        "systemctl is-active ssh.service; "
        # the sshd serving this very session is in ssh.service's cgroup (no pam_systemd scope)
        "grep -q 'system.slice/ssh.service' /proc/$PPID/cgroup && echo ssh.service; "
        "sudo -n id -u; ls /var/lib/apt/lists | grep -c _Packages || true"
    )
    results = _run(inventory, known, "--shell", script)
    assert sorted(results) == sorted(SYSTEMD_NODES)
    for node, result in results.items():
        assert result["stdout"].split("\n")[:7] == ["systemd", "running", "0", "active", "ssh.service", "0", "0"], (node, result)


def test_the_compute_nodes_have_the_stand_in_gpus_device_files(nodes):
    cluster, inventory, known = nodes
    results = _run(inventory, known, "--shell", "ls /dev/nvidia* 2>/dev/null; command -v nvidia-smi || true")
    assert results["ctl"]["stdout"] == ""
    for node in ("sn1", "sn2", "sn3"):
        assert results[node]["stdout"].split() == ["/dev/nvidia0", "/dev/nvidia1", "/usr/local/bin/nvidia-smi"], results[node]
    # a service stops and starts for real (what the roles will do with munge and slurmd)
    assert cluster.docker_exec("sn1", "sh", "-c", "systemctl restart ssh && systemctl is-active ssh").strip() == "active"


def test_each_node_has_a_cgroup_namespace_of_its_own(nodes):
    """init-cgroupns.sh: seen from the node, PID 1 is at the root of every hierarchy and the
    mounted hierarchies are the node's own (only its units below), so what slurmd makes there
    stays in the container's cgroup on the host, whatever the node is called."""
    _, inventory, known = nodes
    script = (
        "sed 's/^[0-9]*:[^:]*://' /proc/1/cgroup | sort -u; "
        'for d in /sys/fs/cgroup/*/; do [ -e "$d"docker ] && echo "host hierarchy at $d"; done; '
        "{ test -d /sys/fs/cgroup/systemd/system.slice/ssh.service || "  # v1 (this host) or v2
        "test -d /sys/fs/cgroup/system.slice/ssh.service; } && echo own"
    )
    results = _run(inventory, known, "--shell", script)
    for node, result in results.items():
        assert result["stdout"].split() == ["/", "/init.scope", "own"], (node, result)
