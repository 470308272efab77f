"""`setup-cluster --tags slurm` (playbooks/slurm.yml) on the real Slurm cluster (ctl + sn1-sn3).

Every container gets the admin's own slurm.conf (no NodeName lines, a line of the site's) and the
nodes a stale gres.conf; the role must put in exactly what `provision slurm-gres` writes, keep the
admin's line, reconfigure slurmctld once, leave the nodes idle, and change nothing the second time.
The daemons run on files identical to those the session started them with, so the other Slurm
tests see the same cluster; each container's files are put back afterwards.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from conftest import run_cli
from slurm_support import NODES, PARTITION, SLURM_CONF_HEAD

pytestmark = pytest.mark.cluster

HOSTS = ("ctl", *NODES)
ADMIN_LINE = "# site: kept by provision (the admin's own line)"
ADMIN_CONF = SLURM_CONF_HEAD + ADMIN_LINE + f"\nPartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
STALE_GRES = "AutoDetect=off\n# stale: from before the GPUs were probed\n"
MARKER = "# {} provision slurm nodes (provision slurm-gres --slurm-conf)"


def _inventory(slurm_cluster, tmp_path, slurm: dict | None):
    text = slurm_cluster.inventory.read_text()
    if slurm is not None:
        text += "vars:\n  slurm: " + json.dumps(slurm) + "\n"
    path = tmp_path / "hosts.yml"
    path.write_text(text)
    return path


def _setup(slurm_cluster, inventory, *args):
    return run_cli(
        "setup-cluster", "-i", str(inventory), "--known-hosts", str(slurm_cluster.known_hosts),
        "--facts-dir", str(slurm_cluster.facts_dir), "--accept-new-host-keys", "--json", *args,
    )  # fmt: skip


def _read(slurm_cluster, host, path):
    return slurm_cluster.exec(host, "cat", path, user="root", check=False).stdout


def _reconfigures(slurm_cluster) -> int:
    log = _read(slurm_cluster, "ctl", "/var/log/slurm/slurmctld.log")
    return log.count("_slurm_rpc_reconfigure_controller: completed")


def subprocess_input(slurm_cluster, host, path, text):
    """Write ``text`` to ``path`` in a container as root (test set-up: the admin's own files)."""
    done = subprocess.run(
        ["docker", "exec", "-i", "-u", "root", slurm_cluster.container(host), "sh", "-c", 'cat > "$1"', "sh", path],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _idle(slurm_cluster, seconds: float = 60) -> list[str]:
    states: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        states = slurm_cluster.exec("ctl", "sinfo", "-h", "-o", "%T", check=False).stdout.split()
        if states and set(states) == {"idle"}:
            break
        time.sleep(1)
    return states


@pytest.fixture
def admin_files(slurm_cluster):
    """The admin's slurm.conf everywhere and a stale gres.conf on the nodes; the session's files back afterwards."""
    for host in HOSTS:
        subprocess_input(slurm_cluster, host, "/etc/slurm/slurm.conf", ADMIN_CONF)
        if host != "ctl":
            subprocess_input(slurm_cluster, host, "/etc/slurm/gres.conf", STALE_GRES)
    yield
    for host in HOSTS:
        slurm_cluster.exec(
            host, "sh", "-c", "cp /cluster/slurm/slurm.conf /cluster/slurm/gres.conf /etc/slurm/", user="root", check=False
        )


def test_tags_slurm_writes_what_slurm_gres_prints_and_the_second_run_changes_nothing(slurm_cluster, admin_files, tmp_path):
    inventory = _inventory(slurm_cluster, tmp_path, {"nodes": "slurm"})
    common = ["-i", str(inventory), "--facts-dir", str(slurm_cluster.facts_dir)]
    gres = run_cli("slurm-gres", "slurm", *common, "--slurm-conf", str(tmp_path / "nodes.conf"))
    assert gres.returncode == 0, gres.stderr
    node_lines = (tmp_path / "nodes.conf").read_text()
    before = _reconfigures(slurm_cluster)

    first = _setup(slurm_cluster, inventory, "--tags", "slurm")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    recap = {r["host"]: r for r in json.loads(first.stdout)["recap"]}
    assert all(recap[h]["changed"] >= 2 for h in HOSTS), recap  # slurm.conf and gres.conf on every host
    wanted_conf = ADMIN_CONF + MARKER.format("BEGIN") + "\n" + node_lines + MARKER.format("END") + "\n"
    for host in HOSTS:
        assert _read(slurm_cluster, host, "/etc/slurm/gres.conf") == gres.stdout, host
        assert _read(slurm_cluster, host, "/etc/slurm/slurm.conf") == wanted_conf, host
    assert ADMIN_LINE in wanted_conf and node_lines.startswith("GresTypes=gpu\nNodeName=sn[1-3] CPUs=")
    assert _read(slurm_cluster, "sn1", "/etc/slurm/gres.conf.provision~") == STALE_GRES  # the old file kept
    results = json.loads(first.stdout)["results"]
    reconfigured = {r["host"]: r["status"] for r in results if r["task"] == "scontrol reconfigure where slurmctld runs"}
    assert reconfigured == {"ctl": "changed", "sn1": "ok", "sn2": "ok", "sn3": "ok"}, reconfigured  # only where slurmctld runs
    assert _reconfigures(slurm_cluster) == before + 1, _read(slurm_cluster, "ctl", "/var/log/slurm/slurmctld.log")[-3000:]
    assert _idle(slurm_cluster) == ["idle"], _read(slurm_cluster, "ctl", "/var/log/slurm/slurmctld.log")[-2000:]
    for node in NODES:
        shown = slurm_cluster.exec("ctl", "scontrol", "show", "node", node).stdout
        assert "Gres=gpu:tesla_v100-sxm2-16gb:2" in shown and "State=IDLE" in shown, shown

    second = _setup(slurm_cluster, inventory, "--tags", "slurm")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    assert {r["host"]: r["changed"] for r in json.loads(second.stdout)["recap"]} == dict.fromkeys(HOSTS, 0)
    assert _reconfigures(slurm_cluster) == before + 1  # nothing changed: no reconfigure
    assert _idle(slurm_cluster) == ["idle"]


def test_a_node_without_facts_is_refused_naming_it_before_any_host_is_touched(slurm_cluster, admin_files, tmp_path):
    inventory = _inventory(slurm_cluster, tmp_path, {})  # nodes: all, and ctl was never probed
    done = _setup(slurm_cluster, inventory, "--tags", "slurm")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no facts for host ctl" in done.stderr and "provision probe ctl" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert _read(slurm_cluster, "sn1", "/etc/slurm/slurm.conf") == ADMIN_CONF  # nothing written
    assert _read(slurm_cluster, "sn1", "/etc/slurm/gres.conf") == STALE_GRES


def test_a_plain_setup_cluster_leaves_slurm_alone_unless_the_inventory_asks(slurm_cluster, admin_files, tmp_path):
    inventory = _inventory(slurm_cluster, tmp_path, None)  # no `slurm:`: ctl without facts does not matter
    done = _setup(slurm_cluster, inventory, "--check")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    slurm_tasks = [
        r for r in json.loads(done.stdout)["results"] if r["task"] in ("slurm.conf NodeName lines (a managed block)", "gres.conf")
    ]
    assert len(slurm_tasks) == 2 * len(HOSTS) and {r["status"] for r in slurm_tasks} == {"skipped"}


@pytest.mark.parametrize("claim", ["DEFAULT", "sn1"])
def test_a_node_reporting_default_or_another_nodes_name_never_reaches_slurm_conf(slurm_cluster, admin_files, tmp_path, claim):
    """Issue 24, finding 3: root on sn2 sets its host name to DEFAULT (or sn1). The probe reads the
    kernel's host name (/proc/sys/kernel/hostname), which an unprivileged container cannot change
    (sethostname needs CAP_SYS_ADMIN), so sn2's own captures from the session's probe are replayed
    with that host name, as the issue reproduced it; the files then go to the real Slurm nodes."""
    facts, captures = tmp_path / "facts", tmp_path / "captures"
    subprocess.run(["cp", "-a", str(slurm_cluster.facts_dir), str(facts)], check=True)
    captures.mkdir()
    subprocess.run(["cp", "-a", str(slurm_cluster.facts_dir / "sn2"), str(captures / "sn2")], check=True)
    (captures / "sn2" / "hostname.txt").write_text(claim + "\n")
    probed = run_cli("probe", "--replay", str(captures), "sn2", "--facts-dir", str(facts))
    assert probed.returncode == 0, probed.stdout + probed.stderr
    assert json.loads((facts / "sn2.json").read_text())["hostname"] == claim  # the attack reached the facts

    gres = run_cli("slurm-gres", "slurm", "-i", str(slurm_cluster.inventory), "--facts-dir", str(facts),
                   "--slurm-conf", str(tmp_path / "nodes.conf"))  # fmt: skip
    assert gres.returncode == 1, gres.stderr
    errors = [line for line in gres.stderr.splitlines() if line.startswith("provision: error:")]
    assert len(errors) == 1 and "host sn2: it reports the host name" in errors[0] and "fix the host name on sn2" in errors[0]
    lines = (tmp_path / "nodes.conf").read_text().splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["NodeName=sn[1,3]"], lines  # sn1's own line, sn2 left out
    assert "DEFAULT" not in gres.stdout + "\n".join(lines) and "NodeName=sn2" not in gres.stdout

    # setup-cluster: sn2 alone fails (its claim is its own doing); sn1 and sn3 get slurm.conf and
    # gres.conf without sn2's line and converge. --limit leaves ctl out so that the session's
    # slurmctld is not reconfigured without sn2 (the other Slurm tests use it); the files are
    # the same whichever hosts run (they are computed for every node of the inventory).
    inventory = _inventory(slurm_cluster, tmp_path, {"nodes": "slurm", "facts_dir": str(facts)})
    wanted_conf = ADMIN_CONF + MARKER.format("BEGIN") + "\n" + "\n".join(lines) + "\n" + MARKER.format("END") + "\n"
    for attempt in ("first", "second"):
        done = _setup(slurm_cluster, inventory, "--tags", "slurm", "--limit", "sn1,sn2,sn3")
        assert done.returncode == 1, done.stdout[-3000:] + done.stderr
        warnings = [line for line in done.stderr.splitlines() if "host sn2: it reports the host name" in line]
        assert len(warnings) == 1 and "the other hosts went on" in warnings[0], done.stderr
        report = json.loads(done.stdout)
        recap = {r["host"]: (r["changed"], r["failed"]) for r in report["recap"]}
        changed = 2 if attempt == "first" else 0
        assert recap == {"sn1": (changed, 0), "sn2": (0, 1), "sn3": (changed, 0)}, (attempt, recap)
        failed = [r for r in report["results"] if r["status"] == "failed"]
        assert [(r["host"], r["task"]) for r in failed] == [
            ("sn2", "the folder of Slurm's files (this node's facts checked first)")
        ]
        message = failed[0]["message"]
        assert "host sn2: it reports the host name" in message and "\n" not in message
        assert "slurm.conf and gres.conf are written without sn2" in message
        for host in ("sn1", "sn3"):
            assert _read(slurm_cluster, host, "/etc/slurm/slurm.conf") == wanted_conf, host
            assert _read(slurm_cluster, host, "/etc/slurm/gres.conf") == gres.stdout, host
        assert _read(slurm_cluster, "sn2", "/etc/slurm/slurm.conf") == ADMIN_CONF  # the claimant gets nothing
        assert _read(slurm_cluster, "sn2", "/etc/slurm/gres.conf") == STALE_GRES
        assert _read(slurm_cluster, "ctl", "/etc/slurm/slurm.conf") == ADMIN_CONF  # not in --limit
