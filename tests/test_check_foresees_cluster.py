"""Issue 34, item 2: `setup-cluster --check` runs the preconditions the real run checks and reports,
per host, the failure it foresees. On the fresh-node cluster (s1: the NFS server on the roles
image; f1: a fresh node, empty apt lists; neither runs systemd), two faults the issue met:

- the dataset folder missing on the NFS server (`--check --diff` said failed=0; the real run
  failed on `dataset path /data/imagenet does not exist`);
- `jupyter_service: true` on a node without systemd (`--check` predicted success; the real run
  failed on `systemctl: not found`).

`--check` and the real run are compared host by host: the same task fails with the same message,
and what --check predicts changed before it holds what the real run changed. (The fresh nodes of
the README's quick start, where nothing fails, are compared in tests/test_quickstart_cluster.py.)
The Anaconda installer is the TEST STAND-IN under tests/standins/anaconda."""

from __future__ import annotations

import json
import os

import pytest
from roles_support import FRESH_COMPOSE, FRESH_NODES, start_fresh_cluster, stop_roles_cluster, write_role_inventory

from conftest import run_cli

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    project = f"provforesee{os.getpid()}"
    material = tmp_path_factory.mktemp("foresee-material")
    try:
        yield start_fresh_cluster(project, material)
    finally:
        stop_roles_cluster(project, material, FRESH_COMPOSE)


def inventory(cluster, folder) -> tuple:
    users = (
        "    - {name: alice, uid: 2001, conda_clone: true, jupyter_port: 8888, jupyter_password_file: secrets/alice.jupyter,\n"
        "       jupyter_service: true}\n"
    )
    hosts, known = write_role_inventory(cluster, folder, FRESH_NODES, users)
    return ("-i", str(hosts), "--known-hosts", str(known), "--json")


def outcome(done) -> tuple[dict, dict]:
    """{host: (task, message) of its failed task}, {host: [tasks changed]} of a --json run."""
    data = json.loads(done.stdout)
    failed = {r["host"]: (r["task"], r["message"]) for r in data["results"] if r["status"] == "failed"}
    changed: dict = {}
    for r in data["results"]:
        if r["status"] == "changed":
            changed.setdefault(r["host"], []).append(r["task"])
    return failed, changed


def test_check_foresees_a_missing_dataset_folder_and_a_service_without_systemd(cluster, tmp_path):
    base = inventory(cluster, tmp_path)
    assert cluster.docker_exec("s1", "sh", "-c", "test -e /data/imagenet && echo there || echo absent").strip() == "absent"
    assert cluster.docker_exec("f1", "sh", "-c", "test -d /run/systemd/system && echo yes || echo no").strip() == "no"

    checked = run_cli("setup-cluster", *base, "--check", "--diff")
    foreseen, predicted = outcome(checked)
    real = run_cli("setup-cluster", *base)
    failed, changed = outcome(real)
    assert checked.returncode == 1 and real.returncode == 1, (checked.stderr[-2000:], real.stderr[-2000:])
    assert foreseen == failed, (foreseen, failed)  # the same task fails on each host, with the same message
    assert failed["s1"] == (
        "dataset folder on the NFS server",
        "dataset path /data/imagenet does not exist on the NFS server "
        "(create it, or set nfs_create_missing: true to let setup-cluster create it)",
    )
    assert failed["f1"][0].startswith("Jupyter service of each user who asked for it") and failed["f1"][1] == (
        "service provision-jupyter-alice: systemd is not running on this host (no /run/systemd/system); "
        "start the service by other means"
    )
    for host, tasks in changed.items():  # what --check predicted changed holds what the real run changed
        assert set(tasks) <= set(predicted.get(host, [])), (host, set(tasks) - set(predicted.get(host, [])))
    recap = {r["host"]: r["failed"] for r in json.loads(checked.stdout)["recap"]}
    assert recap == {"s1": 1, "f1": 1}
