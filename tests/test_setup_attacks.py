"""setup-cluster among users who attack (issue 14), on real sshd containers: after a converged
run, a cluster user plants a link (or a hard link) where the playbooks work in her home, then the
run is repeated. Root must never act through it: the target (/etc/shadow, /root, a shared file)
stays exactly as it was, and that host fails with one line naming the host, the path and why.
Also: a secret file's content never shows in any process's argv while it is written as a user,
and the become password works where /tmp is mounted noexec."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import threading

import pytest
from setup_support import SETUP_NODES, add_sudo_user, start_setup_cluster, stop_setup_cluster, write_files

from conftest import run_cli

pytestmark = pytest.mark.cluster

USERS = """vars:
  cluster_users:
    - {name: alice, uid: 2001}
    - {name: bob, uid: 2002}
"""
NODES = (*SETUP_NODES, "s5")  # s5: /tmp is a noexec tmpfs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    project = f"provattack{os.getpid()}"
    material = tmp_path_factory.mktemp("attack-material")
    try:
        yield start_setup_cluster(project, material, NODES)
    finally:
        stop_setup_cluster(project, material)


@pytest.fixture
def files(cluster, tmp_path):
    for node in NODES:  # what an earlier test planted goes (rm never follows a link)
        cluster.docker_exec(node, "rm", "-rf", "/home/alice/.ssh", "/home/bob/.ssh")
    return write_files(cluster, tmp_path, USERS, NODES)


def setup(files, *extra, input=None, json_output=True):
    inventory, known = files
    output = ["--json"] if json_output else []
    return run_cli(
        "setup-cluster", "-i", str(inventory), "--known-hosts", str(known), *output, "--no-verify", *extra, input=input
    )


def recap(done) -> dict:
    return {r["host"]: r for r in json.loads(done.stdout)["recap"]}


def fingerprint(cluster, node, *paths) -> str:
    """Content digest, owner, group and mode of each path (as root sees it)."""
    script = 'for p in "$@"; do printf "%s " "$p"; stat -c "%U:%G %a %h" "$p"; sha256sum "$p" 2>/dev/null || echo dir; done'
    return cluster.docker_exec(node, "sh", "-c", script, "sh", *paths)


def as_user(cluster, node, user, script):
    return cluster.docker_exec(node, "sh", "-c", script, user=user)


def assert_refused(done, node, path, why):
    """The host failed, and one output line names the host, the path and why."""
    assert re.search(rf"^{node} +: ok=\d+ changed=\d+ unreachable=0 failed=1 ", done.stdout, re.MULTILINE), done.stdout
    lines = [line for line in done.stdout.splitlines() if line.startswith(f"failed: [{node}] ")]
    assert len(lines) == 1 and f": {path} " in lines[0] and why in lines[0] and lines[0].endswith("refused"), lines


def test_links_planted_in_homes_are_never_followed(cluster, files):
    first = setup(files)
    assert first.returncode == 0, first.stdout + first.stderr
    shadow = fingerprint(cluster, "s1", "/etc/shadow")
    roots = {node: fingerprint(cluster, node, "/root", "/etc/shadow") for node in SETUP_NODES}
    # s1: authorized_keys becomes a link to /etc/shadow (root used to read it and write it back as alice's file).
    as_user(cluster, "s1", "alice", "ln -sf /etc/shadow ~/.ssh/authorized_keys")
    # s2: ~/.ssh becomes a link to /root (root used to chown /root to alice).
    as_user(cluster, "s2", "alice", "rm -rf ~/.ssh && ln -s /root ~/.ssh")
    # s3: the public key becomes a link to /etc/shadow with the private key gone (regenerated as root before).
    as_user(cluster, "s3", "alice", "rm -f ~/.ssh/id_ed25519 && ln -sf /etc/shadow ~/.ssh/id_ed25519.pub")
    second = setup(files, json_output=False)
    assert second.returncode == 1
    assert_refused(second, "s1", "~alice/.ssh/authorized_keys", "symbolic link")
    assert_refused(second, "s2", "~alice/.ssh", "symbolic link")
    assert_refused(second, "s3", "~alice/.ssh/id_ed25519.pub", "symbolic link")
    assert re.search(r"^s5 +: ok=\d+ changed=0 unreachable=0 failed=0 ", second.stdout, re.MULTILINE), second.stdout
    for node in SETUP_NODES:
        assert fingerprint(cluster, node, "/root", "/etc/shadow") == roots[node]
        assert cluster.docker_exec(node, "stat", "-c", "%U %a", "/root").strip() == "root 700"
    assert fingerprint(cluster, "s1", "/etc/shadow") == shadow
    assert "root:" not in cluster.docker_exec(
        "s1", "sh", "-c", "cat /home/alice/.ssh/authorized_keys.provision~ 2>/dev/null; true"
    )
    assert "root:" not in second.stdout  # no hash in any output


def test_private_key_link_and_foreign_hard_link_refused(cluster, files):
    assert setup(files).returncode == 0
    # s1: bob's private key becomes a link to /etc/shadow.
    as_user(cluster, "s1", "bob", "ln -sf /etc/shadow ~/.ssh/id_ed25519")
    # s2: bob's authorized_keys becomes a hard link to a root file he may write (protected_hardlinks
    # lets him link it): root used to chown that file to bob (or write through it).
    cluster.docker_exec("s2", "sh", "-c", "echo 'shared config' > /srv/shared.conf && chmod 666 /srv/shared.conf")
    as_user(cluster, "s2", "bob", "rm -f ~/.ssh/authorized_keys && ln /srv/shared.conf ~/.ssh/authorized_keys")
    shared = fingerprint(cluster, "s2", "/srv/shared.conf")
    # s3: the folder of bob's keys is a link to a folder root owns (its private key regenerated there before).
    cluster.docker_exec("s3", "sh", "-c", "mkdir -p /srv/rootkeys && chmod 755 /srv/rootkeys")
    as_user(cluster, "s3", "bob", "rm -rf ~/.ssh && ln -s /srv/rootkeys ~/.ssh")
    done = setup(files, json_output=False)
    assert done.returncode == 1
    assert_refused(done, "s1", "~bob/.ssh/id_ed25519", "symbolic link")
    assert_refused(done, "s2", "~bob/.ssh/authorized_keys", "hard link")
    assert_refused(done, "s3", "~bob/.ssh", "symbolic link")
    assert fingerprint(cluster, "s2", "/srv/shared.conf") == shared
    assert cluster.docker_exec("s3", "ls", "-A", "/srv/rootkeys") == ""


def test_a_secret_written_as_a_user_never_shows_in_argv(cluster, files, tmp_path):
    # A 1 MiB file written into alice's home (as alice): the old `runuser ... sh -c '<command>'`
    # put the whole content in argv (visible in ps; over 128 KiB it cannot even run).
    secret = b"TOPSECRET-4f9c2a71e8d3b605"  # 27 bytes: its base64 starts the content's base64
    content = secret + b"\n" + b"padding line\n" * 80000
    marker = base64.b64encode(secret[:24]).decode()
    playbook = tmp_path / "secret.yml"
    playbook.write_text(
        "- hosts: s1\n  become: true\n  tasks:\n"
        f"    - file: {{path: ~alice/big.secret, content: {json.dumps(content.decode())}, owner: alice, secret: true}}\n"
        "      become_user: alice\n"
    )
    watch = (
        "rm -f /run/argv-hits /run/argv-stop; : >/run/argv-seen; while [ ! -e /run/argv-stop ]; do "
        "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <\"$f\" 2>/dev/null; echo; done > /run/argv-now; "
        'grep -c runuser /run/argv-now >> /run/argv-seen; grep -e "$M1" -e "$M2" /run/argv-now >> /run/argv-hits; done'
    )
    watcher = threading.Thread(
        target=lambda: subprocess.run(
            ["docker", "exec", "-e", f"M1={marker}", "-e", f"M2={secret.decode()}", cluster.container("s1"), "sh", "-c", watch],
            capture_output=True,
        )
    )
    watcher.start()
    try:
        done = setup(files, "--playbook", str(playbook))
    finally:
        cluster.docker_exec("s1", "touch", "/run/argv-stop")
        watcher.join()
    assert done.returncode == 0, done.stdout + done.stderr
    assert cluster.docker_exec("s1", "sh", "-c", "cat /run/argv-hits 2>/dev/null; true") == ""
    # the watcher really looked while the step ran as alice (it saw the runuser process)
    assert any(int(n) > 0 for n in cluster.docker_exec("s1", "cat", "/run/argv-seen").split())
    assert cluster.docker_exec("s1", "stat", "-c", "%U %a %s", "/home/alice/big.secret").split() == [
        "alice",
        "600",
        str(len(content)),
    ]
    assert marker not in done.stdout + done.stderr and secret.decode() not in done.stdout + done.stderr


def test_become_password_where_tmp_is_noexec(cluster, files, tmp_path):
    password = "N0exec pass$"
    assert "noexec" in cluster.docker_exec("s5", "findmnt", "-no", "OPTIONS", "/tmp")
    add_sudo_user(cluster, "s5", password)
    inventory, known = files
    inventory.write_text(inventory.read_text().replace("user: mpi", "user: pw"))
    playbook = tmp_path / "become.yml"
    playbook.write_text(
        '- hosts: s5\n  become: true\n  tasks:\n    - file: {path: /etc/provision-noexec, content: "root wrote this\\n"}\n'
    )
    done = setup(files, "--playbook", str(playbook), "--ask-become-pass", input=password + "\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert cluster.docker_exec("s5", "stat", "-c", "%U %a", "/etc/provision-noexec").strip() == "root 644"
    assert password not in done.stdout + done.stderr
    wrong = setup(files, "--playbook", str(playbook), "--ask-become-pass", input="not it\n")
    assert wrong.returncode == 1 and "become (sudo) failed" in recap(wrong)["s5"]["message"]
