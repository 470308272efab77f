"""Issue 33, findings 1-3, on real sshd containers, with the cluster users playing the attacker:
links planted where `provision run --copy --become` writes, a loop racing the admin's copy for the
backup's name, a sticky /scratch (no ``fs.protected_symlinks`` relied on: it is 0 on this machine
and the containers inherit it), and bob making /scratch/alice before the docs' playbook does.

Root never acts through what a user controls: every target (/root/.ssh, /etc/passwd, /etc) keeps
its content, owner and mode, and a refused host fails with one line naming the host, the path and
why (the owner, for a folder another user made)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from setup_support import SETUP_NODES, start_setup_cluster, stop_setup_cluster, write_files
from test_setup_attacks import as_user, fingerprint, recap, setup

from conftest import run_cli

pytestmark = pytest.mark.cluster

USERS = """vars:
  cluster_users:
    - {name: alice, uid: 2001}
    - {name: bob, uid: 2002}
"""
RACE_LIMIT = 90  # seconds a user's loop may race the admin's writes at most (it stops when told)
STOP = "/run/provision-race-stop"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The setup nodes after one converged run: alice and bob exist, with their homes."""
    project = f"provpaths{os.getpid()}"
    material = tmp_path_factory.mktemp("paths-material")
    try:
        cluster = start_setup_cluster(project, material)
        files = write_files(cluster, tmp_path_factory.mktemp("paths-inventory"), USERS)
        first = setup(files)
        assert first.returncode == 0, first.stdout + first.stderr
        yield cluster, files
    finally:
        stop_setup_cluster(project, material)


def run(files, *args):
    inventory, known = files
    return run_cli("run", *args[:1], "-i", str(inventory), "--known-hosts", str(known), *args[1:])


def race(cluster, node: str, user: str, loop: str) -> subprocess.Popen:
    """``user`` runs ``loop`` over and over on ``node`` until :func:`stop` (or RACE_LIMIT): started,
    not waited for."""
    cluster.docker_exec(node, "rm", "-f", STOP, "/tmp/provision-race-rounds")
    script = (
        f"end=$(($(date +%s) + {RACE_LIMIT})); n=0; while [ ! -e {STOP} ] && [ $(date +%s) -lt $end ]; "
        f"do {loop}; n=$((n + 1)); done; echo $n >/tmp/provision-race-rounds"
    )
    return subprocess.Popen(["docker", "exec", "-u", user, cluster.container(node), "sh", "-c", script])


def stop(cluster, racers: dict[str, subprocess.Popen]) -> None:
    """Stop the loops; each must have raced (many rounds while the admin worked)."""
    for node, racer in racers.items():
        cluster.docker_exec(node, "touch", STOP)
        assert racer.wait(timeout=RACE_LIMIT + 30) == 0
        assert int(cluster.docker_exec(node, "cat", "/tmp/provision-race-rounds")) > 10, node


def test_run_copy_become_never_writes_through_a_users_link(cluster, tmp_path):
    """Finding 1: alice links her ~/.ssh to /root/.ssh; the admin copies her keys there as root."""
    cluster, files = cluster
    keys = tmp_path / "alice_keys"
    keys.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAlicesKey alice@laptop\n")
    for node in SETUP_NODES:
        cluster.docker_exec(
            node, "sh", "-c", "install -d -m 700 /root/.ssh && echo 'ssh-ed25519 AAAA admin' >/root/.ssh/authorized_keys"
        )
    roots = {node: fingerprint(cluster, node, "/root/.ssh", "/root/.ssh/authorized_keys") for node in SETUP_NODES}
    as_user(cluster, "s1", "alice", "rm -rf ~/.ssh && ln -s /root/.ssh ~/.ssh")
    as_user(cluster, "s2", "alice", "ln -sf /root/.ssh/authorized_keys ~/.ssh/authorized_keys")
    done = run(files, "s[1-3]", "--become", "--copy", str(keys), "--dest", "/home/alice/.ssh/authorized_keys")
    assert done.returncode == 1, done.stdout + done.stderr
    for node in SETUP_NODES:
        assert fingerprint(cluster, node, "/root/.ssh", "/root/.ssh/authorized_keys") == roots[node]
        assert "AlicesKey" not in cluster.docker_exec(node, "cat", "/root/.ssh/authorized_keys")
    # s1: written as alice, and the kernel refused her the folder of root's; s2: her link replaced
    # by a file of hers (never written through); s3: written as her
    size = len(keys.read_bytes())
    assert done.stdout.count(f"copied {size} bytes to /home/alice/.ssh/authorized_keys (sha256 ") == 2, done.stdout
    assert done.stdout.count(") as alice") == 2, done.stdout
    assert "s1: folder /home/alice/.ssh does not exist, or alice cannot reach it" in done.stderr, done.stderr
    for node in ("s2", "s3"):
        line = cluster.docker_exec(node, "stat", "-c", "%U %F", "/home/alice/.ssh/authorized_keys").strip()
        assert line == "alice regular file", (node, line)
        assert "AlicesKey" in cluster.docker_exec(node, "cat", "/home/alice/.ssh/authorized_keys")
    cluster.docker_exec("s3", "rm", "/home/alice/.ssh/authorized_keys.provision~")  # the first copy's backup
    again = run(files, "s3", "--become", "--copy", str(keys), "--dest", "/home/alice/.ssh/authorized_keys")
    assert (
        again.returncode == 0 and f"unchanged: /home/alice/.ssh/authorized_keys already holds these {size} bytes" in again.stdout
    )
    assert "absent" in cluster.docker_exec(
        "s3", "sh", "-c", "ls /home/alice/.ssh/authorized_keys.provision~ 2>/dev/null || echo absent"
    )
    as_user(cluster, "s1", "alice", "rm -f ~/.ssh && mkdir -m 700 ~/.ssh")  # for the tests after


def test_run_copy_backup_race_never_follows_a_planted_link(cluster, tmp_path):
    """Finding 1, the backup: alice loops planting notes.conf.provision~ -> /etc/passwd (and at
    the old backup's temporary names) while the admin copies to her notes.conf, over and over;
    the same with root's own file in the sticky /scratch."""
    cluster, files = cluster
    passwd = {node: fingerprint(cluster, node, "/etc/passwd", "/etc/shadow") for node in SETUP_NODES}
    for node in SETUP_NODES:
        cluster.docker_exec(node, "sh", "-c", "mkdir -p /scratch && chmod 1777 /scratch")
    loop = (
        "ln -sf /etc/passwd ~/notes.conf.provision~ 2>/dev/null; "
        "ln -sf /etc/passwd /scratch/notes.conf.provision~ 2>/dev/null; "
        "for t in ~/.notes.conf.provision-tmp.* /scratch/.notes.conf.provision-tmp.*; "
        'do [ -d "$t" ] && ln -sf /etc/passwd "$t/old" 2>/dev/null; done'
    )
    racers = {node: race(cluster, node, "alice", loop) for node in SETUP_NODES}
    local = tmp_path / "notes.conf"
    try:
        for copy in range(4):
            local.write_text(f"root::0:0:not a passwd line, copy {copy}\n")
            for dest in ("/home/alice/notes.conf", "/scratch/notes.conf"):
                done = run(files, "s[1-3]", "--become", "--copy", str(local), "--dest", dest)
                assert done.returncode == 0, done.stdout + done.stderr
    finally:
        stop(cluster, racers)
    for node in SETUP_NODES:
        assert fingerprint(cluster, node, "/etc/passwd", "/etc/shadow") == passwd[node], node
        assert "not a passwd line" not in cluster.docker_exec(node, "cat", "/etc/passwd")
        # her file is hers; root's file in /scratch is root's, and holds the last copy
        assert cluster.docker_exec(node, "stat", "-c", "%U", "/home/alice/notes.conf").strip() == "alice"
        assert cluster.docker_exec(node, "stat", "-c", "%U", "/scratch/notes.conf").strip() == "root"


def test_setup_cluster_writes_in_a_sticky_folder_only_a_name_nobody_else_has(cluster, tmp_path):
    """Finding 2: /scratch (1777) is a folder users can write. A file task there writes root's
    own name (by a rename, the backup too, while alice races for the backup's name), refuses a
    name bob made, and a folder below a name bob could make first."""
    cluster, files = cluster
    for node in SETUP_NODES:
        cluster.docker_exec(node, "sh", "-c", "mkdir -p /scratch && chmod 1777 /scratch && rm -rf /scratch/motd* /scratch/new")
    playbook = tmp_path / "scratch.yml"

    def play(content: str, *extra: str):
        playbook.write_text(
            "- hosts: all\n  become: true\n  tasks:\n"
            f"    - file: {{path: /scratch/motd, content: {json.dumps(content)}, mode: '0644'}}\n" + "".join(extra)
        )
        return setup(files, "--playbook", str(playbook), json_output=False)

    passwd = {node: fingerprint(cluster, node, "/etc/passwd") for node in SETUP_NODES}
    assert play("first\n").returncode == 0
    racers = {
        node: race(cluster, node, "alice", "ln -sf /etc/passwd /scratch/motd.provision~ 2>/dev/null") for node in SETUP_NODES
    }
    try:
        for n in range(3):
            done = play(f"version {n}\n")
            assert done.returncode == 0, done.stdout
    finally:
        stop(cluster, racers)
    for node in SETUP_NODES:
        assert fingerprint(cluster, node, "/etc/passwd") == passwd[node]
        assert cluster.docker_exec(node, "cat", "/scratch/motd") == "version 2\n"
    # bob's own name there: refused, his file untouched
    as_user(cluster, "s2", "bob", "rm -f /scratch/motd2; echo bob > /scratch/motd2")
    done = play("x\n", "    - file: {path: /scratch/motd2, content: root}\n")
    line = [line for line in done.stdout.splitlines() if line.startswith("failed: [s2] ")]
    assert len(line) == 1 and line[0].endswith(
        "/scratch/motd2 is in a folder every user can write (/scratch, owner root, mode 1777, sticky) "
        "and is bob's, not the reader's own: refused"
    ), done.stdout
    assert cluster.docker_exec("s2", "stat", "-c", "%U %s", "/scratch/motd2") == "bob 4\n"
    # mkdir -p below a name bob could plant first: refused, nothing made
    done = play("x\n", "    - directory: {path: /scratch/new/sub, mode: '0755'}\n")
    assert done.returncode == 1
    assert "/scratch/new/sub is below a folder another user can write (/scratch, owner root, mode 1777): refused" in done.stdout
    assert cluster.docker_exec("s1", "sh", "-c", "ls /scratch/new 2>/dev/null || echo absent") == "absent\n"


def test_the_docs_scratch_folders_never_taken_over(cluster, tmp_path):
    """Finding 3, with the docs' example playbook (/scratch 1777, then /scratch/{{item.name}} owned
    by each user, 0700): bob makes /scratch/alice first on s1, 0777 with a results/ and a link
    inside. s1 fails with one line naming the host, the path and bob; the folder stays bob's;
    the other hosts converge, then alice's own folder is fixed as alice and her link refused."""
    cluster, files = cluster
    for node in SETUP_NODES:
        cluster.docker_exec(node, "sh", "-c", "rm -rf /scratch")
    site = tmp_path / "site.yml"
    site.write_text(
        "- hosts: all\n  become: true\n  tasks:\n"
        "    - directory: {path: /scratch, mode: '1777'}\n"
        "    - directory: {path: '/scratch/{{ item.name }}', owner: '{{ item.name }}', group: '{{ item.name }}', mode: '0700'}\n"
        "      loop: '{{ cluster_users }}'\n"
    )
    cluster.docker_exec("s1", "sh", "-c", "mkdir -p /scratch && chmod 1777 /scratch")
    as_user(
        cluster,
        "s1",
        "bob",
        "mkdir -m 777 /scratch/alice && mkdir -m 777 /scratch/alice/results && ln -s /home/bob /scratch/alice/shared",
    )
    done = setup(files, "--playbook", str(site), json_output=False)
    assert done.returncode == 1
    failed = [line for line in done.stdout.splitlines() if line.startswith("failed: [s1] ")]
    assert len(failed) == 1 and failed[0].endswith(
        "/scratch/alice is bob's folder, not alice's: refused "
        "(provision never takes over a folder another user made: move it away, then run again)"
    ), done.stdout
    assert cluster.docker_exec("s1", "stat", "-c", "%U %a", "/scratch/alice", "/scratch/alice/results") == "bob 777\nbob 777\n"
    summary = recap(setup(files, "--playbook", str(site), "--limit", "s2,s3"))
    assert all(row["changed"] == 0 and row["failed"] == 0 for row in summary.values()), summary
    for node in ("s2", "s3"):
        assert cluster.docker_exec(node, "stat", "-c", "%U %G %a", "/scratch/alice", "/scratch/bob") == (
            "alice alice 700\nbob bob 700\n"
        )
    # alice's own folder with a wrong mode: fixed as alice; then swapped for a link to /etc: refused, /etc untouched
    as_user(cluster, "s2", "alice", "chmod 755 /scratch/alice")
    assert recap(setup(files, "--playbook", str(site), "--limit", "s2"))["s2"]["changed"] == 1
    assert cluster.docker_exec("s2", "stat", "-c", "%U %a", "/scratch/alice") == "alice 700\n"
    etc = fingerprint(cluster, "s3", "/etc")
    as_user(cluster, "s3", "alice", "rmdir /scratch/alice && ln -s /etc /scratch/alice")
    done = setup(files, "--playbook", str(site), "--limit", "s3", json_output=False)
    assert done.returncode == 1 and "/scratch/alice is a symbolic link (provision never follows a link): refused" in done.stdout
    assert fingerprint(cluster, "s3", "/etc") == etc


def test_creates_accepts_a_link_it_never_follows(cluster, tmp_path):
    """Issue 34, item 7: `creates:` only asks whether the name is there; a link counts (Debian's
    /usr/bin/python3, an installer's /usr/local/bin entries), dangling or not, as Ansible's
    glob does; a marker another user planted in /tmp decides nothing (refused)."""
    cluster, files = cluster
    for node in SETUP_NODES:
        cluster.docker_exec(
            node, "sh", "-c", "ln -sf /opt/tool-1.2/bin/tool /usr/local/bin/provision-tool; rm -f /tmp/provision-ran"
        )
    playbook = tmp_path / "creates.yml"
    playbook.write_text(
        "- hosts: all\n  become: true\n  tasks:\n"
        "    - command: {cmd: 'touch /root/provision-installed', creates: /usr/local/bin/provision-tool}\n"
        "    - command: {cmd: 'id -un > /tmp/provision-ran', creates: /tmp/provision-ran}\n"
        "      become_user: alice\n"
    )
    as_user(cluster, "s3", "bob", "echo planted > /tmp/provision-ran")
    done = setup(files, "--playbook", str(playbook), json_output=False)
    assert done.returncode == 1, done.stdout
    assert "absent" in cluster.docker_exec("s1", "sh", "-c", "ls /root/provision-installed 2>/dev/null || echo absent")
    for node in ("s1", "s2"):
        assert cluster.docker_exec(node, "cat", "/tmp/provision-ran") == "alice\n"
    assert re.search(
        r"failed: \[s3\] .*/tmp/provision-ran is in a folder every user can write .* and is another user's", done.stdout
    )
    assert recap(setup(files, "--playbook", str(playbook), "--limit", "s1,s2"))["s1"]["changed"] == 0


GRANT_ALICE = (  # setfacl -m u:alice:rwx /srv/proj, as setxattr stores it (the image has no acl package)
    "import os, struct; e = [(1, 7, 2**32 - 1), (2, 7, 2001), (4, 5, 2**32 - 1), (16, 7, 2**32 - 1), (32, 5, 2**32 - 1)]; "
    "os.setxattr('/srv/proj', 'system.posix_acl_access', struct.pack('<I', 2) + b''.join(struct.pack('<HHI', *x) for x in e))"
)


def test_a_folder_an_acl_opens_to_a_user_is_a_folder_users_can_write(cluster, tmp_path):
    """The admin's shared project folder: /srv/proj is root's, 0755, and an ACL lets alice write
    it (``setfacl -m u:alice:rwx``); stat's mode reads 0775 root:root (the ACL's mask in the
    group's bits). alice links /srv/proj/etc -> /etc. Neither `run --copy --become` nor a
    playbook's directory acts through her link: each host refused with the folder, its owner,
    mode and ACL; /etc/motd keeps its content and /etc/ssh stays root's."""
    cluster, files = cluster
    for node in SETUP_NODES:
        cluster.docker_exec(node, "sh", "-c", "rm -rf /srv/proj && mkdir -m 755 -p /srv/proj")
        cluster.docker_exec(node, "python3", "-c", GRANT_ALICE)
        assert cluster.docker_exec(node, "ls", "-ld", "/srv/proj").startswith("drwxrwxr-x+ ")
    etc = {node: fingerprint(cluster, node, "/etc/motd", "/etc/ssh") for node in SETUP_NODES}
    try:
        for node in SETUP_NODES:
            as_user(cluster, node, "alice", "ln -s /etc /srv/proj/etc")
        motd = tmp_path / "motd"
        motd.write_text("the project's notes\n")
        done = run(files, "s[1-3]", "--become", "--copy", str(motd), "--dest", "/srv/proj/etc/motd")
        assert done.returncode == 1, done.stdout + done.stderr
        for node in SETUP_NODES:
            assert (
                f"{node}: refused: /srv/proj/etc/motd is below /srv/proj, a folder another user can write "
                "(owner root, mode 775 and an ACL)" in done.stderr
            ), done.stderr
        playbook = tmp_path / "project.yml"
        playbook.write_text(
            "- hosts: all\n  become: true\n  tasks:\n"
            "    - directory: {path: /srv/proj/etc/ssh, owner: alice, group: alice, mode: '0755'}\n"
        )
        done = setup(files, "--playbook", str(playbook), json_output=False)
        assert done.returncode == 1, done.stdout
        failed = [line for line in done.stdout.splitlines() if line.startswith("failed: [")]
        why = "/srv/proj/etc/ssh is below a folder another user can write (/srv/proj, owner root, mode 0775 and an ACL): refused"
        assert len(failed) == 3 and all(line.endswith(why) for line in failed), done.stdout
        for node in SETUP_NODES:
            assert fingerprint(cluster, node, "/etc/motd", "/etc/ssh") == etc[node], node
    finally:
        for node in SETUP_NODES:
            cluster.docker_exec(node, "sh", "-c", "chown root:root /etc/ssh; rm -rf /srv/proj")
