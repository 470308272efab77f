"""Issue 34, item 2: a cluster user logs in with her own key. setup-cluster puts her keys
(``ssh_keys`` in the inventory, ``ssh_keys_file`` beside it) in her authorized_keys on every node;
the real OpenSSH client logs in as her with each key through the nodes' real sshd; an option sshd
honours (``from=``) is honoured; a key removed from the inventory stops logging in while a line
she wrote herself keeps working; a link at her authorized_keys is refused, never written through."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from setup_support import SETUP_NODES, start_setup_cluster, stop_setup_cluster, write_files

from cluster_support import write_ed25519
from conftest import run_cli

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    project = f"provownkeys{os.getpid()}"
    material = tmp_path_factory.mktemp("ownkeys-material")
    try:
        yield start_setup_cluster(project, material)
    finally:
        stop_setup_cluster(project, material)


def login(cluster, folder: Path, node: str, key: Path, user: str = "alice") -> subprocess.CompletedProcess:
    """``ssh -i KEY USER@node whoami`` with the real OpenSSH client: BatchMode (no password, no
    prompt), the node's host key checked, only this key offered."""
    known = folder / "ssh_known_hosts"
    known.write_text("".join(cluster.known_hosts_line(n) for n in SETUP_NODES))
    command = [
        "ssh", "-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={known}",
        "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=10", "-F", "/dev/null",
        "-p", str(cluster.ports[node]), f"{user}@127.0.0.1", "whoami",
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def run(inventory: Path, known: Path) -> tuple[subprocess.CompletedProcess, dict]:
    done = run_cli("setup-cluster", "-i", str(inventory), "--known-hosts", str(known), "--tags", "users,ssh", "--json")
    return done, (json.loads(done.stdout) if done.stdout.startswith("{") else {})


def test_her_own_keys_log_her_in_and_leave_with_the_inventory(cluster, tmp_path):
    laptop = write_ed25519(tmp_path / "laptop", "alice@laptop")
    phone = write_ed25519(tmp_path / "phone", "alice@phone")
    elsewhere = write_ed25519(tmp_path / "elsewhere", "alice@elsewhere")
    hers = write_ed25519(tmp_path / "hers", "alice@own-line")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "alice.pub").write_text(f"# her phone\n{phone} alice@phone\n")
    users = (
        "vars:\n  cluster_users:\n    - {name: mpi, uid: 1000}\n    - name: alice\n      uid: 2001\n"
        f"      ssh_keys: ['{laptop} alice@laptop', 'from=\"10.255.255.1\" {elsewhere} alice@elsewhere']\n"
        "      ssh_keys_file: keys/alice.pub\n"
    )
    inventory, known = write_files(cluster, tmp_path, users)

    first, report = run(inventory, known)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    for node in SETUP_NODES:
        for key in ("laptop", "phone"):
            done = login(cluster, tmp_path, node, tmp_path / key)
            assert done.returncode == 0 and done.stdout.strip() == "alice", (node, key, done.stderr)
        # sshd read the from= option of that line: this client is not 10.255.255.1
        refused = login(cluster, tmp_path, node, tmp_path / "elsewhere")
        assert refused.returncode == 255 and "Permission denied" in refused.stderr, (node, refused.stderr)
    text = cluster.docker_exec("s1", "cat", "/home/alice/.ssh/authorized_keys")
    assert f'from="10.255.255.1" {elsewhere} alice@elsewhere provision-own-key\n' in text
    assert cluster.docker_exec("s1", "stat", "-c", "%U %a", "/home/alice/.ssh/authorized_keys") == "alice 600\n"

    # She adds a key of her own by hand; the phone key leaves the inventory's file.
    cluster.docker_exec("s2", "sh", "-c", f"echo '{hers} alice@own-line' >> /home/alice/.ssh/authorized_keys", user="alice")
    (tmp_path / "keys" / "alice.pub").write_text("# no phone any more\n")
    second, report = run(inventory, known)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    changed = sorted((r["host"], r["task"]) for r in report["results"] if r["status"] == "changed")
    task = "every node's key of the user, and her own keys, in the user's authorized_keys"
    assert changed == [(node, task) for node in SETUP_NODES], changed
    for node in SETUP_NODES:
        assert login(cluster, tmp_path, node, tmp_path / "phone").returncode == 255, node
        assert login(cluster, tmp_path, node, tmp_path / "laptop").returncode == 0, node
    assert login(cluster, tmp_path, "s2", tmp_path / "hers").stdout.strip() == "alice"  # her own line kept
    third, report = run(inventory, known)
    assert third.returncode == 0 and {r["host"]: r["changed"] for r in report["recap"]} == dict.fromkeys(SETUP_NODES, 0)

    # A link at her authorized_keys (to a file only root may write) is refused on that node, never
    # written through; the other nodes converge.
    cluster.docker_exec("s3", "sh", "-c", "cd /home/alice/.ssh && mv authorized_keys keep && ln -s /etc/shadow authorized_keys")
    shadow = cluster.docker_exec("s3", "sha256sum", "/etc/shadow")
    (tmp_path / "keys" / "alice.pub").write_text(f"{phone} alice@phone\n")
    fourth, report = run(inventory, known)
    assert fourth.returncode == 1
    failed = [(r["host"], r["message"]) for r in report["results"] if r["status"] == "failed"]
    assert [host for host, _ in failed] == ["s3"] and "is a symbolic link" in failed[0][1], failed
    assert cluster.docker_exec("s3", "sha256sum", "/etc/shadow") == shadow
    assert login(cluster, tmp_path, "s1", tmp_path / "phone").stdout.strip() == "alice"
