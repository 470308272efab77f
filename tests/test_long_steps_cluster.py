"""Issue 15, long steps, on a real sshd node (the roles image, one node): an Anaconda install cut
off by its time limit (the TEST STAND-IN installer pauses half-way) leaves a prefix the next run
recognises as its own and installs again; the installer goes over SFTP, streamed into a private
folder and checked by sha256 on the node, never inside the script; time limits are per step."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time

import pytest
from roles_support import start_roles_cluster, stop_roles_cluster

from conftest import run_cli
from provision.engine.uploads import UPLOAD_PARENT
from provision.inventory.model import Host
from provision.transport.options import SshOptions
from provision.transport.session import Session

pytestmark = pytest.mark.cluster

STANDIN = os.path.join(os.path.dirname(__file__), "standins", "anaconda", "Anaconda-TEST-STAND-IN-Linux.sh")
NODE = "r2"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    project = f"provlong{os.getpid()}"
    material = tmp_path_factory.mktemp("long-material")
    try:
        yield start_roles_cluster(project, material, nodes=(NODE,))
    finally:
        stop_roles_cluster(project, material)


def files(cluster, folder, timeout: int | None):
    shutil.copy(STANDIN, folder / "Anaconda3-TEST-STAND-IN.sh")
    sha = hashlib.sha256(open(STANDIN, "rb").read()).hexdigest()  # noqa: SIM115
    limit = f", timeout: {timeout}" if timeout else ""
    (folder / "hosts.yml").write_text(
        cluster.inventory_yaml([NODE])
        + f'vars:\n  anaconda: [{{installer: Anaconda3-TEST-STAND-IN.sh, sha256: "{sha}", prefix: /opt/anaconda3{limit}}}]\n'
    )
    (folder / "known_hosts").write_text(cluster.known_hosts_line(NODE))
    return ["-i", str(folder / "hosts.yml"), "--known-hosts", str(folder / "known_hosts"), "--json", "--tags", "anaconda"]


def leftovers(cluster) -> str:
    return cluster.docker_exec(NODE, "sh", "-c", "ls -d /var/tmp/provision-* 2>/dev/null; true")


def test_interrupted_install_is_redone_by_the_next_run(node, tmp_path):
    cluster = node
    node.docker_exec(NODE, "sh", "-c", "echo 120 >/tmp/anaconda-test-stand-in.pause")
    started = time.monotonic()
    cut = run_cli("setup-cluster", *files(cluster, tmp_path, timeout=3))
    took = time.monotonic() - started
    data = json.loads(cut.stdout)
    failed = [r for r in data["results"] if r["status"] == "failed"]
    assert cut.returncode == 1 and len(failed) == 1, data["results"]
    assert "installer stopped after 3s (its timeout); the next run installs again" in failed[0]["message"]
    assert took < 60, took  # the step's own limit, not the 120 s pause nor the round trip's
    # half an install: the prefix is there, the marker is not, the in-progress mark is
    state = cluster.docker_exec(NODE, "sh", "-c", "ls -A /opt/anaconda3; cat /opt/anaconda3.provision-installing")
    assert "conda-meta" in state and ".provision-installer" not in state and "sha256:" in state, state
    running = cluster.docker_exec(NODE, "sh", "-c", "ps -eo args | grep -e '^bash .*installer.sh' -e '^sleep 120' || true")
    assert running == "", running  # killed, with its children
    assert leftovers(cluster) == ""  # the upload folder and the installer's folder are removed

    node.docker_exec(NODE, "rm", "/tmp/anaconda-test-stand-in.pause")
    again = run_cli("setup-cluster", *files(cluster, tmp_path, timeout=None))
    data = json.loads(again.stdout)
    assert again.returncode == 0, [r for r in data["results"] if r["status"] == "failed"]
    changes = [c for r in data["results"] for c in r["changes"]]
    assert any("into /opt/anaconda3 (again: an earlier install was interrupted)" in c for c in changes), changes
    sha = hashlib.sha256(open(STANDIN, "rb").read()).hexdigest()  # noqa: SIM115
    assert cluster.docker_exec(NODE, "cat", "/opt/anaconda3/.provision-installer") == f"sha256:{sha}\n"
    assert cluster.docker_exec(NODE, "sh", "-c", "ls /opt/anaconda3.provision-installing 2>&1; true").startswith("ls: cannot")
    assert leftovers(cluster) == ""
    third = run_cli("setup-cluster", *files(cluster, tmp_path, timeout=None))
    assert third.returncode == 0 and all(r["changed"] == 0 for r in json.loads(third.stdout)["recap"])


def test_step_time_limit_of_command_timeout(node, tmp_path):
    """--command-timeout bounds each change (here a command task), with a clear message."""
    playbook = tmp_path / "slow.yml"
    playbook.write_text(
        "- name: slow\n  hosts: all\n  become: true\n  tasks:\n    - name: sleeps\n      command: {cmd: sleep 60}\n"
    )
    args = files(node, tmp_path, timeout=None)[:4]
    started = time.monotonic()
    done = run_cli("setup-cluster", *args, "--json", "--playbook", str(playbook), "--command-timeout", "2", "--no-verify")
    assert time.monotonic() - started < 40
    [failed] = [r for r in json.loads(done.stdout)["results"] if r["status"] == "failed"]
    assert done.returncode == 1 and "step stopped after 2s (its time limit: --command-timeout)" in failed["message"], failed


def test_files_go_over_sftp_into_a_private_folder_checked_by_sha256(node, tmp_path):
    cluster = node
    data = os.urandom(3 * 1024 * 1024 + 17)
    local = tmp_path / "payload.bin"
    local.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    options = SshOptions(known_hosts=tmp_path / "kh")
    (tmp_path / "kh").write_text(cluster.known_hosts_line(NODE))
    host = Host(NODE, address="127.0.0.1", port=cluster.ports[NODE], user="mpi", key=str(cluster.key))
    with Session(host, options) as session:
        folder = session.make_private_dir(UPLOAD_PARENT)
        session.put_file(str(local), f"{folder}/{sha}", sha)
        seen = cluster.docker_exec(NODE, "sh", "-c", f"stat -c '%a %U' {folder} {folder}/{sha}; sha256sum <{folder}/{sha}")
        assert seen.split("\n")[:2] == ["700 mpi", "600 mpi"] and seen.split("\n")[2].startswith(sha), seen
        with pytest.raises(Exception, match="cannot send"):  # never over an existing file
            session.put_file(str(local), f"{folder}/{sha}", sha)
        local.write_bytes(data[:-1] + b"!")  # the controller file changed after it was checked
        with pytest.raises(Exception, match="changed while it was sent"):
            session.put_file(str(local), f"{folder}/other", sha)
        session.remove_private_dir(folder)
    assert cluster.docker_exec(NODE, "sh", "-c", f"ls -d {folder} 2>&1; true").startswith("ls: cannot")
