"""Integration: `provision probe` against real OpenSSH servers in Docker containers."""

from __future__ import annotations

import json
import subprocess

import pytest

from cluster_support import NODES, fingerprint_of
from conftest import run_cli

pytestmark = pytest.mark.cluster


def probe_json(inventory, known_hosts, facts_dir, *extra):
    # /dev/null as ssh_config: this machine's /etc/ssh/ssh_config (Debian: HashKnownHosts yes) does not apply.
    done = run_cli(
        "probe",
        "-i",
        str(inventory),
        "--known-hosts",
        str(known_hosts),
        "--facts-dir",
        str(facts_dir),
        "--connect-timeout",
        "3",
        "--ssh-config",
        "/dev/null",
        "--json",
        *extra,
    )
    return done, json.loads(done.stdout)


def test_probe_cluster_failing_hosts_do_not_stop_the_others(cluster, cluster_files, tmp_path):
    inventory, known_hosts = cluster_files
    before = {n: cluster.accepted_logins(n) for n in ("node1", "node2", "minsky")}
    done, report = probe_json(inventory, known_hosts, tmp_path / "facts", *NODES)
    assert done.returncode == 1, done.stderr
    by_host = {h["host"]: h for h in report["hosts"]}
    assert [by_host[n]["status"] for n in NODES] == ["ok", "ok", "hostkey", "unreachable", "ok"]
    # The changed key is refused, naming the key it got and the one known_hosts has.
    assert "HOST KEY CHANGED" in by_host["node3"]["error"]
    assert fingerprint_of(cluster.host_keys["node3"]) in by_host["node3"]["error"]
    assert fingerprint_of(cluster.host_keys["node1"]) in by_host["node3"]["error"]
    assert "node3" in done.stderr and "down1" in done.stderr
    # One SSH login per probed host: the whole probe is one connection, one command.
    after = {n: cluster.accepted_logins(n) for n in before}
    assert {n: after[n] - before[n] for n in before} == {"node1": 1, "node2": 1, "minsky": 1}


def test_probe_real_container_facts(cluster, cluster_files, tmp_path):
    inventory, known_hosts = cluster_files
    done, report = probe_json(inventory, known_hosts, tmp_path / "facts", "node1")
    assert done.returncode == 0, done.stderr
    facts = report["hosts"][0]["facts"]
    expected_cpus = int(cluster.docker_exec("node1", "nproc", "--all"))
    assert facts["hostname"] == "node1"
    assert sum(len(core["cpus"]) for s in facts["cpu"]["sockets"] for core in s["cores"]) == expected_cpus
    assert facts["openmpi"]["version"].startswith("4.1") and facts["openmpi"]["source"] == "ompi_info"
    assert any(i["name"] == "eth0" and i["up"] for i in facts["interfaces"])
    assert "nvidia-smi-query" in facts["unavailable"]  # no GPU: "not available", not a failure
    assert (tmp_path / "facts" / "node1.json").exists()
    assert (tmp_path / "facts" / "node1" / "numactl-H.txt").exists()
    # The node image has hwloc-nox: rank-file numbering comes from hwloc, as OpenMPI's does.
    assert facts["cpu"]["source"] == "hwloc-xml" and (tmp_path / "facts" / "node1" / "hwloc-xml.txt").exists()
    assert not (tmp_path / "facts" / "node1" / "nvidia-smi-query.txt").exists()


@pytest.mark.parametrize("node", ["node1", "m51"])  # hwloc 2.9 (Debian 12), 2.12 (Debian 13)
def test_hwloc_plugins_left_closed_change_nothing_in_the_xml(cluster, node):
    # Issue 37: the hwloc-xml step keeps hwloc's plugin files closed (HWLOC_PLUGINS_BLACKLIST).
    # On the real hwloc, with the plugins these images install (pci, gl, opencl, libxml), the XML
    # it prints is what hwloc prints with them loaded: the linux component finds the PCI devices.
    from provision.facts.hwloc import PLUGINS_NOT_LOADED, SOURCE

    installed = cluster.docker_exec(node, "sh", "-c", "ls /usr/lib/*/hwloc/")
    assert {"hwloc_pci.so", "hwloc_xml_libxml.so"} <= set(installed.split())
    step = cluster.docker_exec(node, "sh", "-c", SOURCE.command, user="mpi")
    loaded = cluster.docker_exec(node, "sh", "-c", SOURCE.command.replace("HWLOC_PLUGINS_BLACKLIST=", "UNUSED="), user="mpi")
    assert step == loaded and "PCIDev" in step
    verbose_run = f"export HWLOC_PLUGINS_VERBOSE=1; {{ {SOURCE.command}\n}} 2>&1 >/dev/null"
    verbose = cluster.docker_exec(node, "sh", "-c", verbose_run, user="mpi")
    assert all(f"`{name}' is blacklisted" in verbose for name in installed.replace(".so", "").split()), verbose
    assert set(installed.replace(".so", "").split()) <= set(PLUGINS_NOT_LOADED)


def test_probe_minsky_standin_over_ssh(cluster, cluster_files, tmp_path):
    inventory, known_hosts = cluster_files
    done, report = probe_json(inventory, known_hosts, tmp_path / "facts", "minsky")
    assert done.returncode == 0, done.stderr
    facts = report["hosts"][0]["facts"]
    assert facts["arch"] == "ppc64le"
    assert facts["cpu"]["source"] == "ppc64_cpu-info+numactl-H"
    sockets = facts["cpu"]["sockets"]
    assert [len(s["cores"]) for s in sockets] == [10, 10]
    assert [c["index"] for c in sockets[1]["cores"]] == list(range(10))
    assert sockets[1]["cores"][0]["cpus"] == list(range(80, 88))
    assert facts["cpu"]["threads_per_core"] == 8
    # The container's real lscpu disagrees with the POWER sources; the facts say which was used.
    assert any("used ppc64_cpu-info+numactl-H" in note for note in facts["notes"])
    assert facts["unavailable"]["hwloc-xml"] == "not installed"


def test_unknown_host_key_refused_then_accept_new_appends(cluster, tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(cluster.inventory_yaml(("node1", "node2")))
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("# kept\n" + cluster.known_hosts_line("node2"))
    done, report = probe_json(inventory, known_hosts, tmp_path / "facts")
    statuses = {h["host"]: h for h in report["hosts"]}
    assert statuses["node1"]["status"] == "hostkey" and statuses["node2"]["status"] == "ok"
    assert "host key unknown" in statuses["node1"]["error"]
    assert fingerprint_of(cluster.host_keys["node1"]) in statuses["node1"]["error"]

    done, report = probe_json(inventory, known_hosts, tmp_path / "facts", "--accept-new-host-keys")
    assert done.returncode == 0, done.stderr
    lines = known_hosts.read_text().splitlines()
    assert lines[:2] == ["# kept", cluster.known_hosts_line("node2").strip()]  # nothing rewritten
    assert lines[2:] == [cluster.known_hosts_line("node1").strip()]  # exactly one line appended
    done, _ = probe_json(inventory, known_hosts, tmp_path / "facts")  # now trusted without the flag
    assert done.returncode == 0, done.stderr


def test_auth_failure_and_unreadable_key(cluster, cluster_files, tmp_path):
    _, known_hosts = cluster_files
    from cluster_support import write_ed25519

    stranger = tmp_path / "stranger"
    write_ed25519(stranger, "not-authorized")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(cluster.inventory_yaml(("node1",), key=stranger))
    done, report = probe_json(inventory, known_hosts, tmp_path / "facts")
    assert report["hosts"][0]["status"] == "auth"
    # what to check next: the login name and every key that was offered
    assert "as user mpi" in report["hosts"][0]["error"] and str(stranger) in report["hosts"][0]["error"]

    missing = tmp_path / "no-such-key"
    inventory.write_text(cluster.inventory_yaml(("node1",), key=missing))
    done, report = probe_json(inventory, known_hosts, tmp_path / "facts")
    assert report["hosts"][0]["status"] == "key" and str(missing) in report["hosts"][0]["error"]


def test_capture_script_on_node_then_replay_matches_probe(cluster, cluster_files, tmp_path):
    inventory, known_hosts = cluster_files
    script = run_cli("capture-script").stdout
    # Run the printed script on the node as a user would (plain sh, nothing installed)...
    subprocess.run(
        ["docker", "exec", "-i", cluster.container("node2"), "sh", "-s", "/tmp/cap"],
        input=script,
        text=True,
        check=True,
        capture_output=True,
    )
    subprocess.run(["docker", "cp", f"{cluster.container('node2')}:/tmp/cap", str(tmp_path / "cap")], check=True)
    replayed = run_cli("probe", "--replay", str(tmp_path / "cap"), "--json", "--no-save")
    assert replayed.returncode == 0, replayed.stderr
    done, probed = probe_json(inventory, known_hosts, tmp_path / "facts", "node2")
    replay_facts = json.loads(replayed.stdout)["hosts"][0]["facts"]
    probe_facts = probed["hosts"][0]["facts"]
    for key in ("hostname", "arch", "cpu", "openmpi", "memory_mib"):
        assert replay_facts[key] == probe_facts[key], key


def test_run_an_ad_hoc_command_on_a_group(cluster, cluster_files, tmp_path):
    from conftest import run_cli

    inventory, known_hosts = cluster_files
    inventory.write_text(inventory.read_text() + "groups:\n  pair: [node1, node2, down1]\n")
    done = run_cli(
        "run",
        "pair",
        "-i",
        str(inventory),
        "--known-hosts",
        str(known_hosts),
        "--connect-timeout",
        "3",
        "--",
        "sh",
        "-c",
        'echo "$(hostname) says $1"; [ "$(hostname)" = node1 ]',
        "sh",
        "a b;c",
    )
    assert done.returncode == 1, done.stderr
    assert "node1 | rc=0\nnode1: node1 says a b;c\n" in done.stdout and "node2 | rc=1\nnode2: node2 says a b;c\n" in done.stdout
    assert "down1 | unreachable" in done.stderr and "2 of 3 hosts failed: node2, down1" in done.stderr
