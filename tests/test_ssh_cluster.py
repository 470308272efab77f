"""Integration: host keys from ssh_config's files, ProxyJump hops and time limits, on real sshd."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from cluster_support import fingerprint_of
from conftest import run_cli
from provision.inventory.model import Host
from provision.transport.connection import open_connection, run_command, run_on_connection
from provision.transport.known_hosts import host_matches
from provision.transport.options import HostFailure, SshOptions

pytestmark = pytest.mark.cluster


def probe(tmp_path, *args):
    done = run_cli("probe", "--json", "--facts-dir", str(tmp_path / "facts"), "--connect-timeout", "5", *args, cwd=tmp_path)
    return done, {h["host"]: h for h in json.loads(done.stdout)["hosts"]}


def test_node_key_only_in_global_file_named_by_ssh_config(cluster, tmp_path):
    site = tmp_path / "site_known_hosts"
    site.write_text("# site-wide keys\n" + cluster.known_hosts_line("node1"))
    if shutil.which("ssh-keygen"):  # most sites hash them too: `ssh-keygen -H` as an admin would
        subprocess.run(["ssh-keygen", "-H", "-f", str(site)], check=True, capture_output=True)
    user = tmp_path / "user_known_hosts"
    config = tmp_path / "ssh_config"
    config.write_text(f"Host 127.0.0.1\n  UserKnownHostsFile {user}\n  GlobalKnownHostsFile {site}\n")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(cluster.inventory_yaml(("node1", "node2")))
    done, hosts = probe(tmp_path, "-i", str(inventory), "--ssh-config", str(config))
    assert hosts["node1"]["status"] == "ok", done.stderr
    # node2 is in no file: unknown, and the message lists the files ssh_config named.
    assert hosts["node2"]["status"] == "hostkey" and str(site) in hosts["node2"]["error"] and str(user) in hosts["node2"]["error"]
    assert not user.exists()  # nothing recorded without --accept-new-host-keys

    # accept-new records node2 in the user file (HashKnownHosts honoured), never in the global one.
    config.write_text(config.read_text() + "  HashKnownHosts yes\n")
    before = site.read_bytes()
    done, hosts = probe(tmp_path, "-i", str(inventory), "--ssh-config", str(config), "--accept-new-host-keys")
    assert done.returncode == 0, done.stderr
    (line,) = user.read_text().splitlines()
    assert host_matches(line.split()[0], f"[127.0.0.1]:{cluster.ports['node2']}") and line.startswith("|1|")
    assert site.read_bytes() == before


def test_revoked_key_refused_with_accept_new(cluster, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(f"@revoked * {cluster.host_keys['node1']}\n")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(cluster.inventory_yaml(("node1",)))
    done, hosts = probe(
        tmp_path, "-i", str(inventory), "--known-hosts", str(known), "--accept-new-host-keys", "--ssh-config", "/dev/null"
    )
    assert done.returncode == 1 and hosts["node1"]["status"] == "hostkey"
    assert "REVOKED" in hosts["node1"]["error"] and fingerprint_of(cluster.host_keys["node1"]) in hosts["node1"]["error"]
    assert known.read_text().count("\n") == 1  # not appended


def jump_config(cluster, tmp_path, known):
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host node2\n  User mpi\n  IdentityFile {cluster.key}\n  ProxyJump mpi@127.0.0.1:{cluster.ports['node1']}\n"
        f"Host *\n  IdentityFile {cluster.key}\n  UserKnownHostsFile {known}\n  GlobalKnownHostsFile none\n"
    )
    return config


def test_probe_through_proxyjump_checks_both_hops(cluster, tmp_path):
    known = tmp_path / "known_hosts"
    # node2 is reached from node1 by its compose name, on port 22: known as plain "node2".
    known.write_text(f"node2 {cluster.host_keys['node2']}\n")
    config = jump_config(cluster, tmp_path, known)
    done, hosts = probe(tmp_path, "node2", "--ssh-config", str(config))
    # The jump host's key is unknown: that hop is refused strictly, naming it.
    assert hosts["node2"]["status"] == "hostkey", done.stderr
    assert f"[127.0.0.1]:{cluster.ports['node1']}" in hosts["node2"]["error"]
    assert fingerprint_of(cluster.host_keys["node1"]) in hosts["node2"]["error"]

    known.write_text(known.read_text() + cluster.known_hosts_line("node1"))
    done, hosts = probe(tmp_path, "node2", "--ssh-config", str(config))
    assert hosts["node2"]["status"] == "ok", done.stderr
    assert hosts["node2"]["facts"]["hostname"] == "node2"


def test_jump_to_a_silent_address_times_out_on_the_forwarded_channel(cluster, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(cluster.known_hosts_line("node1"))
    # An unused address on the cluster's network: node1's sshd waits ~3 s for ARP before giving up,
    # so only our channel limit (2 s here) ends the wait for the forwarded connection.
    node1_ip = cluster.docker_exec("node1", "hostname", "-i").split()[0]
    ghost = node1_ip.rsplit(".", 1)[0] + ".250"
    config = jump_config(cluster, tmp_path, known)
    config.write_text(
        f"Host ghost\n  HostName {ghost}\n  ProxyJump mpi@127.0.0.1:{cluster.ports['node1']}\n" + config.read_text()
    )
    done = run_cli("probe", "ghost", "--json", "--no-save", "--connect-timeout", "2", "--ssh-config", str(config), cwd=tmp_path)
    (host,) = json.loads(done.stdout)["hosts"]
    assert (host["status"], host["error"]) == ("timeout", "no SSH answer within 2s"), done.stderr


def test_command_timeout_over_ssh(cluster, cluster_files):
    _, known = cluster_files
    host = Host("node1", address="127.0.0.1", port=cluster.ports["node1"], user="mpi", key=str(cluster.key))
    options = SshOptions(known_hosts=known, connect_timeout=5, command_timeout=0.5)
    assert run_command(host, "echo fine", options).stdout == "fine\n"
    with pytest.raises(HostFailure) as error:
        run_command(host, "sleep 30", options)
    assert error.value.kind == "timeout" and "0.5s" in str(error.value)


def test_real_sshd_agrees_on_aes_gcm(cluster, cluster_files):
    # OpenSSH's sshd offers AES-GCM by default: the connection uses it, so paramiko checks no HMAC
    # in Python per packet (issue 28); what the command prints is unchanged
    _, known = cluster_files
    host = Host("node1", address="127.0.0.1", port=cluster.ports["node1"], user="mpi", key=str(cluster.key))
    connection = open_connection(host, SshOptions(known_hosts=known, connect_timeout=5))
    try:
        connection.open()
        assert (connection.transport.local_cipher, connection.transport.remote_cipher) == ("aes128-gcm@openssh.com",) * 2
        assert run_on_connection(connection, "echo fine", b"", SshOptions(known_hosts=known)).stdout == "fine\n"
    finally:
        connection.close()
