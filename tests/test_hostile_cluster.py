"""Integration: a probed node that is odd (tcsh login shell, a tool that reads stdin) or hostile
(a tool that learns the frame nonce and forges frames naming files), over real SSH.

The `oddnode` container (tests/cluster/docker-compose.yml) runs the real tcsh as user mpi's login
shell and a TEST STAND-IN lscpu (tests/cluster/standins/oddnode/lscpu).
"""

from __future__ import annotations

import json
import shlex
import uuid
from pathlib import Path

import pytest

from cluster_support import wait_for_ssh
from conftest import run_cli

pytestmark = pytest.mark.cluster


@pytest.fixture
def oddnode(cluster, docker_services, tmp_path):
    """An inventory reaching the oddnode, and an empty known_hosts (its key is accepted as new)."""
    port = docker_services.port_for("oddnode", 22)
    wait_for_ssh({"oddnode": port})
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        f"defaults:\n  user: mpi\n  key: {cluster.key}\nhosts:\n  oddnode: {{address: 127.0.0.1, port: {port}}}\n"
    )
    return inventory, tmp_path / "known_hosts"


def probe(inventory: Path, known_hosts: Path, facts_dir: Path):
    done = run_cli(
        "probe",
        "-i",
        str(inventory),
        "--known-hosts",
        str(known_hosts),
        "--accept-new-host-keys",
        "--facts-dir",
        str(facts_dir),
        "--connect-timeout",
        "5",
        "--json",
        "oddnode",
    )
    return done, json.loads(done.stdout)["hosts"][0]


def test_probe_works_whatever_the_login_shell_and_a_tool_reading_stdin_cannot_hang_it(cluster, oddnode, tmp_path):
    assert cluster.docker_exec("oddnode", "getent", "passwd", "mpi").strip().endswith(":/usr/local/bin/tcsh")
    assert "tcsh 6." in cluster.docker_exec("oddnode", "/usr/local/bin/tcsh", "-c", "echo $version", user="mpi")
    done, host = probe(*oddnode, tmp_path / "facts")
    assert done.returncode == 0, done.stderr
    facts = host["facts"]
    assert facts["hostname"] == "oddnode"
    cpus = int(cluster.docker_exec("oddnode", "nproc", "--all"))
    assert sum(len(core["cpus"]) for s in facts["cpu"]["sockets"] for core in s["cores"]) == cpus
    # The stand-in read its stdin, then ran the real lscpu: its parsable output agrees with hwloc's.
    assert facts["cpu"]["source"] == "hwloc-xml" and not any("lscpu-p" in note for note in facts["notes"])
    assert (tmp_path / "facts" / "oddnode" / "lscpu-p.txt").read_text().startswith("# The following")
    assert facts["openmpi"]["version"].startswith("4.1") and facts["memory_mib"] > 0
    assert (tmp_path / "facts" / "oddnode" / "lscpu.txt").read_text().startswith("Architecture:")


@pytest.mark.parametrize("frame", ["/tmp/provision-forged-{tag}", "../../forged-{tag}", "../forged-{tag}", "hostname"])
def test_hostile_node_forging_frames_writes_nothing_and_fails_naming_the_frame(cluster, oddnode, tmp_path, frame):
    name = frame.format(tag=uuid.uuid4().hex[:8])
    cluster.docker_exec("oddnode", "sh", "-c", f"printf '%s\\n' {shlex.quote(name)} >/tmp/forge")
    work = tmp_path / "work"
    try:
        done, host = probe(*oddnode, work / "facts")
    finally:
        cluster.docker_exec("oddnode", "rm", "-f", "/tmp/forge")
    assert done.returncode == 1, done.stderr
    assert host["status"] == "parse"
    if name == "hostname":
        assert "frame 'hostname' appears twice" in host["error"]
    else:
        assert f"unexpected frame {name!r}" in host["error"]
    # Nothing written anywhere: not the forged file, not even the host's facts.
    assert not Path(f"{name}.txt").exists() and not Path(f"/tmp/{Path(name).name}.txt").exists()
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["hosts.yml", "known_hosts"]
