"""Proof on real OpenMPI: a rank file from probed facts, run by mpirun across containers.

mpirun runs on node1 as user mpi and starts ranks on node1 and node2 over SSH (host keys checked
against the cluster's known_hosts). --report-bindings says where each rank was bound.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import run_cli
from plan_support import seed_rankfile_body
from provision.plans.rankcheck import parse_rankfile

pytestmark = pytest.mark.cluster

# [node1:00123] MCW rank 0 bound to socket 0[core 1[hwt 0]]: [./B]
BINDING = re.compile(r"\[(\w+):\d+\] MCW rank (\d+) bound to ((?:socket \d+\[core \d+\[hwt [\d-]+\]\],? ?)+)")
CORE = re.compile(r"socket (\d+)\[core (\d+)")


def test_rank_file_from_facts_binds_every_rank_where_planned(cluster, cluster_files, tmp_path):
    inventory, known_hosts = cluster_files
    facts_dir = tmp_path / "facts"
    common = ["-i", str(inventory), "--facts-dir", str(facts_dir)]
    probed = run_cli("probe", "node1", "node2", *common, "--known-hosts", str(known_hosts))
    assert probed.returncode == 0, probed.stderr
    cores = int(cluster.docker_exec("node1", "nproc"))
    learners = min(cores, 2)
    dims = f"{learners}x2x1"
    rankfile = tmp_path / f"{dims}.rf"
    done = run_cli("launch", dims, "--hosts", "node1,node2", *common, "--known-hosts", str(known_hosts), "--allow-no-gpu",
                   "--rankfile", str(rankfile), "--report-bindings", "--run", "--", "hostname")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    planned = {line.rank: line for line in parse_rankfile(rankfile.read_text())}
    bound = {}
    for host, rank, where in BINDING.findall(output):
        bound[int(rank)] = (host, sorted({(int(s), int(c)) for s, c in CORE.findall(where)}))
    assert sorted(bound) == list(range(2 * learners)), output
    for rank, line in planned.items():
        host, cores_bound = bound[rank]
        assert host == line.host, (rank, output)
        assert cores_bound == [(line.socket, core) for core in line.cores], (rank, output)
    assert sorted(re.findall(r"^(node\d)$", done.stdout, re.MULTILINE)) == ["node1"] * learners + ["node2"] * learners


def test_rank_gen_10_core_assumption_fails_and_check_names_the_lines(cluster, cluster_files, tmp_path):
    inventory, known_hosts = cluster_files
    facts_dir = tmp_path / "facts"
    assert run_cli("probe", "node1", "node2", "-i", str(inventory), "--facts-dir", str(facts_dir), "--known-hosts", str(known_hosts)).returncode == 0
    # The seed's rank_gen 4x2x1 file (2 x 10-core sockets assumed), for these two hosts.
    body = "\n".join(seed_rankfile_body("4x2x1")).replace("sys-89074", "node1").replace("sys-89075", "node2") + "\n"
    rankfile = tmp_path / "4x2.rf"
    rankfile.write_text(body)
    subprocess.run(["docker", "cp", str(rankfile), f"{cluster.container('node1')}:/tmp/4x2.rf"], check=True)
    mpirun = subprocess.run(
        ["docker", "exec", "-u", "mpi", cluster.container("node1"), "mpirun", "-n", "8", "-rf", "/tmp/4x2.rf", "hostname"],
        capture_output=True, text=True, timeout=120,
    )
    assert mpirun.returncode != 0, mpirun.stdout
    assert "ORTE_ERROR_LOG: Not found" in mpirun.stdout + mpirun.stderr  # the seed's failure, verbatim
    assert "node1\n" not in mpirun.stdout  # nothing ran

    checked = run_cli("rankfile", "--check", str(rankfile), "--facts-dir", str(facts_dir))
    assert checked.returncode == 1
    cores = int(cluster.docker_exec("node1", "nproc"))
    expected_bad = [line.line for line in parse_rankfile(body) if line.socket >= 1 or max(line.cores) >= cores]
    reported = [int(m) for m in re.findall(r"4x2\.rf:(\d+):", checked.stdout)]
    assert reported == expected_bad and len(reported) == 8
    assert f"has cores 0-{cores - 1}" in checked.stdout and "has 1 socket(s)" in checked.stdout
