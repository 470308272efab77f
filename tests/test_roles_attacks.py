"""The roles among users who attack (issue 14), on the real roles containers (r1..r3: Jupyter
Server, the TEST STAND-IN Anaconda installer, NFS): after a converged run, a cluster user replaces
what the Jupyter and Anaconda roles touch in her home (~/.jupyter, its config, the self-signed
key, ~/.conda, ~/.conda/envs, the clone) by a link, then the run is repeated. Root never acts
through it: the target keeps its content, owner and mode, and the host either fails with one line
naming the host, the path and why, or does the work harmlessly as the user.

Also the NFS client of a node that comes without nfs-common: the same run that installs it reads
"can this node mount" again, so the summary never claims mount.nfs is missing."""

from __future__ import annotations

import json
import os
import re

import pytest
from roles_support import start_roles_cluster, stop_roles_cluster
from test_roles_cluster import inventory, problems, setup
from test_setup_attacks import as_user, assert_refused, fingerprint

pytestmark = pytest.mark.cluster

BARE_CLIENT = "r3"  # comes without nfs-common


@pytest.fixture(scope="module")
def converged(tmp_path_factory):
    """The roles cluster after one run, r3 having had no nfs-common before it."""
    project = f"provrattack{os.getpid()}"
    material = tmp_path_factory.mktemp("roles-attack-material")
    try:
        cluster = start_roles_cluster(project, material)
        cluster.docker_exec("r1", "sh", "-c", "mkdir -p /data/imagenet && echo train-0001 >/data/imagenet/train.txt")
        # Removing works offline; installing needs the package lists the image dropped (the package
        # task does not refresh them): the node gets them first, as an administrator would.
        cluster.docker_exec(
            BARE_CLIENT, "sh", "-c", "apt-get remove -y -q nfs-common >/dev/null 2>&1 && apt-get update -q >/dev/null"
        )
        assert "mount.nfs" not in cluster.docker_exec(BARE_CLIENT, "sh", "-c", "ls /sbin /usr/sbin")
        files = inventory(cluster, tmp_path_factory.mktemp("roles-attack-inventory"))
        first = setup(files)
        assert first.returncode == 0, json.dumps(problems(first))[:4000]
        yield cluster, files, first
    finally:
        stop_roles_cluster(project, material)


def failed_line(done, node) -> str:
    """The one output line of ``node``'s failure (and the recap says it failed)."""
    assert re.search(rf"^{node} +: ok=\d+ changed=\d+ unreachable=0 failed=1 ", done.stdout, re.MULTILINE), done.stdout
    lines = [line for line in done.stdout.splitlines() if line.startswith(f"failed: [{node}] ")]
    assert len(lines) == 1, done.stdout
    return lines[0]


def test_nfs_client_package_installed_then_mount_read_again(converged):
    cluster, _files, first = converged
    assert "mount.nfs" in cluster.docker_exec(BARE_CLIENT, "sh", "-c", "ls /sbin /usr/sbin")
    data = json.loads(first.stdout)
    installed = [
        r for r in data["results"] if r["host"] == BARE_CLIENT and r["task"] == "NFS client package" and r["status"] == "changed"
    ]
    assert installed, "the package task installed nfs-common in this very run"
    lines = [s["text"] for s in data["summary"] if s["role"] == "nfs" and s["host"] == BARE_CLIENT]
    assert lines and all("/data/imagenet: not mounted (" in line for line in lines), lines
    # the container cannot mount (no CAP_SYS_ADMIN), but mount.nfs is there now: the summary says so
    assert not any("mount.nfs" in line for line in lines), lines
    assert all("no privilege to mount (CAP_SYS_ADMIN)" in line for line in lines), lines


def test_jupyter_folder_and_config_links_refused(converged):
    cluster, files, _first = converged
    roots = {node: fingerprint(cluster, node, "/root", "/etc/shadow", "/etc/passwd") for node in ("r1", "r2", "r3")}
    cluster.docker_exec("r3", "sh", "-c", "echo 'shared config' >/srv/shared.conf && chmod 666 /srv/shared.conf")
    # r1: ~/.jupyter becomes a link to /root (root used to chown and chmod it for alice).
    as_user(cluster, "r1", "alice", "rm -rf ~/.jupyter && ln -s /root ~/.jupyter")
    # r2: the config becomes a link to /etc/shadow (root used to read it, --diff to show it).
    as_user(cluster, "r2", "alice", "ln -sf /etc/shadow ~/.jupyter/jupyter_server_config.py")
    # r3: bob's config becomes a hard link to a root file he may write (root used to write through it).
    as_user(
        cluster,
        "r3",
        "bob",
        "rm -f ~/.jupyter/jupyter_server_config.py && ln /srv/shared.conf ~/.jupyter/jupyter_server_config.py",
    )
    shared = fingerprint(cluster, "r3", "/srv/shared.conf")  # its link count is 2 now
    done = setup(files, "--tags", "jupyter", json_output=False)
    assert done.returncode == 1, done.stdout
    assert_refused(done, "r1", "~alice/.jupyter", "symbolic link")
    assert_refused(done, "r2", "~alice/.jupyter/jupyter_server_config.py", "symbolic link")
    assert_refused(done, "r3", "~bob/.jupyter/jupyter_server_config.py", "hard link")
    for node in ("r1", "r2", "r3"):
        assert fingerprint(cluster, node, "/root", "/etc/shadow", "/etc/passwd") == roots[node]
        assert cluster.docker_exec(node, "stat", "-c", "%U %a", "/root").strip() == "root 700"
    assert fingerprint(cluster, "r3", "/srv/shared.conf") == shared
    assert "root:" not in done.stdout and "argon2" not in done.stdout
    # the user puts things back; the next run converges again
    as_user(cluster, "r1", "alice", "rm -f ~/.jupyter")
    as_user(cluster, "r2", "alice", "rm -f ~/.jupyter/jupyter_server_config.py")
    as_user(cluster, "r3", "bob", "rm -f ~/.jupyter/jupyter_server_config.py")
    again = setup(files, "--tags", "jupyter")
    assert again.returncode == 0, problems(again)
    assert cluster.docker_exec("r1", "stat", "-c", "%U %a %F", "/home/alice/.jupyter").strip() == "alice 700 directory"


def test_self_signed_key_link_replaced_as_the_user(converged):
    cluster, files, _first = converged
    shadow = fingerprint(cluster, "r1", "/etc/shadow")
    # alice removes her certificate and points the key at /etc/shadow: openssl used to write the
    # new key through the link (as alice: refused by the kernel, the host failed with "exit 1").
    as_user(
        cluster,
        "r1",
        "alice",
        "cd ~/.jupyter && rm -f jupyter-selfsigned.crt jupyter-selfsigned.key && ln -s /etc/shadow jupyter-selfsigned.key",
    )
    done = setup(files, "--tags", "jupyter")
    assert done.returncode == 0, problems(done)
    assert fingerprint(cluster, "r1", "/etc/shadow") == shadow
    # the work was done as alice: a new key of hers replaced the link (never followed)
    key = cluster.docker_exec("r1", "stat", "-c", "%U %a %F", "/home/alice/.jupyter/jupyter-selfsigned.key").strip()
    assert key == "alice 600 regular file"
    assert "BEGIN CERTIFICATE" in cluster.docker_exec("r1", "cat", "/home/alice/.jupyter/jupyter-selfsigned.crt")
    # and a certificate link: creates: only asks whether the name is there (issue 34: a link counts,
    # as Ansible's glob does), looked up as alice and never followed; nothing is written through it
    as_user(cluster, "r1", "alice", "cd ~/.jupyter && rm -f jupyter-selfsigned.crt && ln -s /etc/shadow jupyter-selfsigned.crt")
    linked = setup(files, "--tags", "jupyter")
    assert linked.returncode == 0, problems(linked)
    assert fingerprint(cluster, "r1", "/etc/shadow") == shadow
    assert (
        cluster.docker_exec("r1", "stat", "-c", "%U %F", "/home/alice/.jupyter/jupyter-selfsigned.crt") == "alice symbolic link\n"
    )
    as_user(cluster, "r1", "alice", "rm -f ~/.jupyter/jupyter-selfsigned.crt")


def test_conda_folders_linked_to_root_folders_are_never_written(converged):
    cluster, files, _first = converged
    for node in ("r1", "r2", "r3"):
        cluster.docker_exec(node, "sh", "-c", "rm -rf /srv/rootconda && mkdir -p /srv/rootconda/envs && chmod 755 /srv/rootconda")
    before = {
        node: cluster.docker_exec(node, "sh", "-c", "ls -laR /srv/rootconda; stat -c '%U %a' /srv/rootconda")
        for node in ("r1", "r2", "r3")
    }
    # r1: ~/.conda is a link to a root folder; r2: ~/.conda/envs is; r3: the clone itself is.
    as_user(cluster, "r1", "alice", "rm -rf ~/.conda && ln -s /srv/rootconda ~/.conda")
    as_user(cluster, "r2", "alice", "rm -rf ~/.conda/envs && ln -s /srv/rootconda/envs ~/.conda/envs")
    as_user(cluster, "r3", "alice", "rm -rf ~/.conda/envs/anaconda3 && ln -s /srv/rootconda/envs ~/.conda/envs/anaconda3")
    done = setup(files, "--tags", "anaconda", json_output=False)
    assert done.returncode == 1, done.stdout
    # done as alice, so the kernel refuses her (a site may well link ~/.conda to a scratch folder:
    # that is hers to do, and works), and the one failed line says where and why
    for node, why in (
        ("r1", "Missing write permissions in: /home/alice/.conda/envs"),
        ("r2", "Missing write permissions in: /home/alice/.conda/envs"),
        ("r3", "prefix already exists: /home/alice/.conda/envs/anaconda3"),
    ):
        line = failed_line(done, node)
        assert "clone of every prefix" in line and line.endswith(why), line
        after = cluster.docker_exec(node, "sh", "-c", "ls -laR /srv/rootconda; stat -c '%U %a' /srv/rootconda")
        assert after == before[node], node  # nothing cloned there, nothing chowned


def test_clone_size_is_measured_as_the_user(converged):
    cluster, files, _first = converged
    # what the test before left: the clones come back in their place
    as_user(cluster, "r1", "alice", "rm -f ~/.conda")
    as_user(cluster, "r3", "alice", "rm -f ~/.conda/envs/anaconda3")
    # r2: alice points ~/.conda/envs at a root folder holding what look like her clones, one with
    # a 5 MiB folder only root may read: the summary's du, run as root, used to measure it.
    cluster.docker_exec(
        "r2",
        "sh",
        "-c",
        "rm -rf /srv/leak && mkdir -p /srv/leak/envs/anaconda3/conda-meta /srv/leak/envs/anaconda2/conda-meta "
        "/srv/leak/envs/anaconda3/secret && head -c 5242880 /dev/zero >/srv/leak/envs/anaconda3/secret/blob && "
        "chmod -R 755 /srv/leak && chmod 700 /srv/leak/envs/anaconda3/secret",
    )
    as_user(cluster, "r2", "alice", "rm -rf ~/.conda/envs && ln -s /srv/leak/envs ~/.conda/envs")
    done = setup(files, "--tags", "anaconda")
    assert done.returncode == 0, problems(done)
    summary = {
        (s["host"], s["text"].split(" ")[1]): s["text"] for s in json.loads(done.stdout)["summary"] if s["role"] == "anaconda"
    }
    size = summary[("r2", "~/.conda/envs/anaconda3")].split()[-2]
    assert size.isdigit() and int(size) < 5, summary  # only what alice herself may read
    assert int(summary[("r1", "~/.conda/envs/anaconda3")].split()[-2]) >= 0  # the others cloned again and measured
    assert cluster.docker_exec("r2", "stat", "-c", "%U %a", "/srv/leak/envs/anaconda3/secret").strip() == "root 700"
