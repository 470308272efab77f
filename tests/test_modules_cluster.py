"""Issue 34, item 4: `conda_path: module` works where `module` is used. setup-cluster writes the
Anaconda modulefile where each node's own `module` command looks (its login shell's MODULEPATH),
on a node with Debian's environment-modules, one with Debian's Lmod, and one with no module
command (environment-modules installed from Debian's archive in the run); then the real `module
load anaconda3` in a login shell puts conda on PATH on every node, --check having foreseen the
same changes. (The Anaconda installer is the TEST STAND-IN under tests/standins/anaconda.) No
RHEL-like image can be built here without a registry: the RHEL folder is kept as a cited case in
tests/test_op_modules.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess

import pytest
from roles_support import ROLES_NODES, direct_inventory, start_roles_cluster, stop_roles_cluster  # noqa: F401

from cluster_support import TESTS_DIR
from conftest import run_cli

pytestmark = pytest.mark.cluster

MODULES_COMPOSE = TESTS_DIR / "cluster" / "modules-compose.yml"
NODES = ("em", "lm", "nm")
STANDIN = TESTS_DIR / "standins" / "anaconda" / "Anaconda-TEST-STAND-IN-Linux.sh"
FOLDERS = {"em": "/etc/environment-modules/modules", "lm": "/etc/lmod/modules", "nm": "/etc/environment-modules/modules"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    project = f"provmodules{os.getpid()}"
    material = tmp_path_factory.mktemp("modules-material")
    try:
        yield start_roles_cluster(project, material, NODES, MODULES_COMPOSE, (TESTS_DIR / "cluster" / "ensure-modules-image.sh",))
    finally:
        stop_roles_cluster(project, material, MODULES_COMPOSE)


def test_the_modulefile_is_where_each_nodes_module_command_looks(cluster, tmp_path):
    (tmp_path / "installers").mkdir()
    shutil.copy(STANDIN, tmp_path / "installers" / "A.sh")
    sha = hashlib.sha256(STANDIN.read_bytes()).hexdigest()
    hosts, known = direct_inventory(cluster, NODES)
    (tmp_path / "hosts.yml").write_text(
        hosts
        + f"vars:\n  conda_path: module\n  anaconda: [{{installer: installers/A.sh, sha256: '{sha}', prefix: /opt/anaconda3}}]\n"
    )
    (tmp_path / "known_hosts").write_text(known)
    base = ("setup-cluster", "-i", str(tmp_path / "hosts.yml"), "--known-hosts", str(tmp_path / "known_hosts"), "--json")
    assert "modulecmd" not in cluster.docker_exec("nm", "sh", "-c", "ls /usr/lib/x86_64-linux-gnu /usr/share 2>/dev/null; true")

    checked = run_cli(*base, "--check", "--tags", "anaconda")
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-2000:]
    first = run_cli(*base, "--tags", "anaconda")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]

    def changes(done):
        return sorted(
            (r["host"], r["task"], str(r["item"])) for r in json.loads(done.stdout)["results"] if r["status"] == "changed"
        )

    assert changes(checked) == changes(first)  # --check foresaw the install and each node's modulefile
    installs = [(h, t) for h, t, _ in changes(first) if t.startswith("environment-modules where")]
    assert installs == [("nm", "environment-modules where the node has no module command (conda_path is module)")]
    for node in NODES:
        written = cluster.docker_exec(node, "cat", f"{FOLDERS[node]}/anaconda3")
        assert written.startswith("#%Module1.0") and "prepend-path PATH /opt/anaconda3/bin" in written, node
        # The real module command, in a login shell as the job user, as a person types it.
        done = subprocess.run(
            ["docker", "exec", "-u", "mpi", cluster.container(node), "bash", "-lc", "module load anaconda3 && command -v conda"],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0 and done.stdout.strip() == "/opt/anaconda3/bin/conda", (node, done.stdout, done.stderr)
        avail = subprocess.run(
            ["docker", "exec", "-u", "mpi", cluster.container(node), "bash", "-lc", "module avail 2>&1"],
            capture_output=True,
            text=True,
        )
        assert "anaconda3" in avail.stdout, (node, avail.stdout)
    again = run_cli(*base, "--tags", "anaconda")  # converged: one round trip per node
    recap = {r["host"]: (r["changed"], r["round_trips"]) for r in json.loads(again.stdout)["recap"]}
    assert again.returncode == 0 and recap == dict.fromkeys(NODES, (0, 1)), recap
