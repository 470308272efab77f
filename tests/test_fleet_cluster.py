"""Issue 15 on real sshd nodes: partial runs never shrink what is cluster-wide, nodes and users
come and go (revocation, rotation, node identity), and a shared /home is written once.

Its own compose projects (s1..s4 from setup-compose.yml; h1..h3 sharing one /home volume)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from setup_support import SHARED_HOME_COMPOSE, restart_node, start_setup_cluster, stop_setup_cluster, write_files

from conftest import run_cli

pytestmark = pytest.mark.cluster

FLEET = ("s1", "s2", "s3", "s4")
USERS = """vars:
  cluster_users:
    - {name: alice, uid: 2001}
    - {name: bob, uid: 2002}
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    project = f"provfleet{os.getpid()}"
    material = tmp_path_factory.mktemp("fleet-material")
    try:
        yield start_setup_cluster(project, material, FLEET)
    finally:
        stop_setup_cluster(project, material)


def setup(files, *extra):
    inventory, known = files
    return run_cli("setup-cluster", "-i", str(inventory), "--known-hosts", str(known), "--json", *extra)


def recap(done) -> dict:
    return {r["host"]: r for r in json.loads(done.stdout)["recap"]}


def text(cluster, node, path) -> str:
    return cluster.docker_exec(node, "sh", "-c", f"cat {path} 2>/dev/null; true")


def blob(public_line: str) -> str:
    return public_line.split()[1]


def user_key(cluster, node, user="alice") -> str:
    return text(cluster, node, f"/home/{user}/.ssh/id_ed25519.pub").strip()


def ssh_as(cluster, source, user, target) -> subprocess.CompletedProcess:
    command = ["runuser", "-u", user, "--", "ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", target, "id -un"]
    return subprocess.run(["docker", "exec", cluster.container(source), *command], capture_output=True, text=True)


def test_partial_runs_never_shrink_and_nodes_join(fleet, tmp_path):
    files = write_files(fleet, tmp_path, USERS, FLEET[:3])
    first = setup(files)
    assert first.returncode == 0, first.stdout[-3000:]
    s3_host_key, s3_alice = blob(fleet.host_keys["s3"]), blob(user_key(fleet, "s3"))

    # s3 down: a run without it still lists it everywhere (its state cached on the controller)
    subprocess.run(["docker", "stop", "-t", "0", fleet.container("s3")], check=True, capture_output=True)
    down = setup(files, "--no-verify")
    assert down.returncode == 1 and recap(down)["s3"]["unreachable"] == 1
    assert all(recap(down)[n]["failed"] == 0 for n in ("s1", "s2"))
    for node in ("s1", "s2"):
        assert s3_host_key in text(fleet, node, "/etc/ssh/ssh_known_hosts")
        assert s3_alice in text(fleet, node, "/home/alice/.ssh/authorized_keys")
    assert fleet.docker_exec("s1", "ssh-keygen", "-F", "s3", "-f", "/etc/ssh/ssh_known_hosts").count("s3") >= 1
    restart_node(fleet, "s3")

    # s4 joins: --limit s4 alone would leave the others not trusting it: refused, saying what to run
    files = write_files(fleet, tmp_path, USERS, FLEET)
    limited = setup(files, "--limit", "s4")
    assert limited.returncode == 2
    assert "s4 is new to this cluster" in limited.stderr and "s1, s2, s3 outside this run" in limited.stderr
    assert "without --limit" in limited.stderr
    assert text(fleet, "s4", "/etc/ssh/ssh_known_hosts") == ""  # nothing touched
    joined = setup(files)
    assert joined.returncode == 0, joined.stdout[-3000:]
    verify = json.loads(joined.stdout)["verify"]
    assert len(verify) == 4 * 3 * 2 and all(p["ok"] for p in verify)
    # now a --limit s4 run is complete for s4 in both directions, from the cache, and changes nothing
    again = setup(files, "--limit", "s4", "--no-verify")
    assert again.returncode == 0 and recap(again)["s4"]["changed"] == 0
    assert sorted(recap(again)) == ["s4"]


def test_nodes_and_users_leave_keys_rotate_and_a_node_cannot_pose(fleet, tmp_path):
    files = write_files(fleet, tmp_path, USERS, FLEET)
    assert setup(files, "--no-verify").returncode == 0
    fleet.docker_exec("s1", "sh", "-c", "echo '# my own line' >> /home/alice/.ssh/authorized_keys")
    assert ssh_as(fleet, "s2", "alice", "s1").stdout.strip() == "alice"

    # s2 leaves the inventory (still running: a stolen or decommissioned node)
    files = write_files(fleet, tmp_path, USERS, ("s1", "s3", "s4"))
    s2_alice = blob(user_key(fleet, "s2"))
    left = setup(files)
    assert left.returncode == 0, left.stdout[-3000:]
    for node in ("s1", "s3", "s4"):
        keys = text(fleet, node, "/home/alice/.ssh/authorized_keys")
        assert s2_alice not in keys and "provision-node=s2" not in keys
        assert blob(fleet.host_keys["s2"]) not in text(fleet, node, "/etc/ssh/ssh_known_hosts")
    assert "# my own line" in text(fleet, "s1", "/home/alice/.ssh/authorized_keys")
    refused = ssh_as(fleet, "s2", "alice", "s1")
    assert refused.returncode != 0 and "Permission denied" in refused.stderr, refused  # revoked

    # bob leaves: account and group gone on every node, home kept, his keys revoked
    files = write_files(fleet, tmp_path, USERS.replace("uid: 2002}", "uid: 2002, state: absent}"), ("s1", "s3", "s4"))
    gone = setup(files)
    assert gone.returncode == 0, gone.stdout[-3000:]
    for node in ("s1", "s3", "s4"):
        assert fleet.docker_exec(node, "sh", "-c", "getent passwd bob; getent group bob; true") == ""
        assert fleet.docker_exec(node, "sh", "-c", "test -d /home/bob && echo kept").strip() == "kept"
        assert "provision-node=" not in text(fleet, node, "/home/bob/.ssh/authorized_keys")
    assert recap(setup(files, "--no-verify"))["s1"]["changed"] == 0

    # alice's keys rotated on every node in one run: only the new ones are trusted
    old = {n: blob(user_key(fleet, n)) for n in ("s1", "s3", "s4")}
    rotated = setup(files, "--rotate-user-keys", "alice")
    assert rotated.returncode == 0, rotated.stdout[-3000:]
    new = {n: blob(user_key(fleet, n)) for n in ("s1", "s3", "s4")}
    assert all(old[n] != new[n] for n in old)
    for node in ("s1", "s3", "s4"):
        keys = text(fleet, node, "/home/alice/.ssh/authorized_keys")
        assert all(k not in keys for k in old.values()) and all(k in keys for k in new.values())
    assert all(p["ok"] for p in json.loads(rotated.stdout)["verify"])
    assert setup(files, "--limit", "s1", "--rotate-user-keys", "alice").returncode == 2

    # s1 reinstalled with a new host key: it replaces the old one everywhere (from the verified connection)
    fleet.docker_exec(
        "s1",
        "sh",
        "-c",
        "rm -f /etc/ssh/ssh_host_ed25519_key*; ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key; "
        "kill -HUP $(cat /run/sshd.pid)",
    )
    time.sleep(1)
    s1_new = fleet.docker_exec("s1", "cat", "/etc/ssh/ssh_host_ed25519_key.pub").split()[:2]
    inventory, known = files
    known.write_text(known.read_text().replace(fleet.host_keys["s1"], " ".join(s1_new)))
    reinstalled = setup(files)
    assert reinstalled.returncode == 0, reinstalled.stdout[-3000:]
    for node in ("s3", "s4"):
        hosts = text(fleet, node, "/etc/ssh/ssh_known_hosts")
        assert s1_new[1] in hosts and blob(fleet.host_keys["s1"]) not in hosts

    # s4 compromised: it reports s1's host key as its own: not believed, s4 fails alone, nothing moves
    fleet.docker_exec(
        "s4",
        "sh",
        "-c",
        "cp /etc/ssh/ssh_host_ed25519_key.pub /root/real.pub; echo '" + " ".join(s1_new) + "' "
        "> /etc/ssh/ssh_host_ed25519_key.pub",
    )
    before = {n: text(fleet, n, "/etc/ssh/ssh_known_hosts") for n in ("s1", "s3")}
    posing = setup(files, "--no-verify")
    assert posing.returncode == 1
    assert "do not include ssh-ed25519 key the controller verified" in recap(posing)["s4"]["message"]
    assert {n: text(fleet, n, "/etc/ssh/ssh_known_hosts") for n in ("s1", "s3")} == before
    fleet.docker_exec("s4", "cp", "/root/real.pub", "/etc/ssh/ssh_host_ed25519_key.pub")

    # s4 compromised again: it claims s1's name: s4 fails alone, naming both; no known_hosts rewritten
    fleet.docker_exec(
        "s4",
        "sh",
        "-c",
        "printf '#!/bin/sh\\n[ \"$1\" = -I ] && exec /bin/hostname -I; echo s1\\n' "
        "> /usr/local/sbin/hostname; chmod 755 /usr/local/sbin/hostname",
    )
    claimed = setup(files, "--no-verify")
    fleet.docker_exec("s4", "rm", "-f", "/usr/local/sbin/hostname")
    assert claimed.returncode == 1
    messages = [r["message"] for r in json.loads(claimed.stdout)["results"] if r["status"] == "failed"]
    assert any("host s4 reports the name or address 's1', which is host s1's" in m for m in messages), messages
    assert {r["host"] for r in json.loads(claimed.stdout)["results"] if r["status"] == "failed"} == {"s4"}
    assert {n: text(fleet, n, "/etc/ssh/ssh_known_hosts") for n in ("s1", "s3")} == before


SHARED = USERS + "  shared_home: true\n"


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory):
    project = f"provhome{os.getpid()}"
    material = tmp_path_factory.mktemp("home-material")
    try:
        yield start_setup_cluster(project, material, ("h1", "h2", "h3"), SHARED_HOME_COMPOSE)
    finally:
        stop_setup_cluster(project, material)


def test_shared_home_written_once_as_the_user(shared_home, tmp_path):
    cluster, nodes = shared_home, ("h1", "h2", "h3")
    # one file system: a file made on h1 is seen on h3 (and /home's device and inode agree)
    cluster.docker_exec("h1", "touch", "/home/.provision-shared-probe")
    assert cluster.docker_exec("h3", "ls", "/home/.provision-shared-probe").strip() == "/home/.provision-shared-probe"
    files = write_files(cluster, tmp_path, SHARED, nodes)
    started = time.monotonic()
    done = setup(files)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:]
    results = json.loads(done.stdout)["results"]
    writers = {
        (r["host"], r["task"])
        for r in results
        if r["status"] == "changed" and ("key pair" in r["task"] or "authorized_keys" in r["task"] or "~/.ssh" in r["task"])
    }
    assert {host for host, _task in writers} == {"h1"}, writers  # written once, by one node
    for user in ("alice", "bob"):
        listing = cluster.docker_exec("h2", "ls", "-ln", f"/home/{user}/.ssh")
        assert listing.count("id_ed25519") == 2 and " 0 0 " not in listing  # the user's files, not root's
        keys = text(cluster, "h3", f"/home/{user}/.ssh/authorized_keys").splitlines()
        assert keys == [f"{user_key(cluster, 'h1', user)} provision-node=h1"]
    verify = json.loads(done.stdout)["verify"]
    assert len(verify) == 3 * 2 * 2 and all(p["ok"] for p in verify), verify
    second = setup(files, "--no-verify")
    assert {h: r["changed"] for h, r in recap(second).items()} == {n: 0 for n in nodes}
    print(f"shared /home, 3 nodes, 2 users: converged in {took:.1f}s; written by {sorted(writers)}")
