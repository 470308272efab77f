"""Issue 24 on real sshd nodes (s1..s3, their own compose project): what a node says about itself
never goes cluster-wide unverified, a node posing as another fails alone, a user's long line
does not stall --diff, and an inventory value with a trailing newline is refused.

The attacker is root on s2: a root-owned fake ``hostname`` first on PATH (as the issue's
reproduction did) prints what it likes for ``hostname``, ``-f`` and ``-I``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess

import pytest
from setup_support import start_setup_cluster, stop_setup_cluster, write_files

pytestmark = pytest.mark.cluster

NODES = ("s1", "s2", "s3")
USERS = "vars:\n  cluster_users:\n    - {name: alice, uid: 2001}\n"
OUTSIDE = ("gitlab.example.com", "192.0.2.7", "203.0.113.9")  # names and addresses outside the cluster


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    project = f"provident{os.getpid()}"
    material = tmp_path_factory.mktemp("ident-material")
    try:
        yield start_setup_cluster(project, material, NODES)
    finally:
        stop_setup_cluster(project, material)


@pytest.fixture(scope="module")
def files(nodes, tmp_path_factory):
    """Inventory and known_hosts; the cluster set up once (users, keys, known_hosts) as the baseline."""
    folder = tmp_path_factory.mktemp("ident-files")
    inventory, known = write_files(nodes, folder, USERS, NODES)
    done = setup((inventory, known), "--accept-new-host-keys")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    return inventory, known


def setup(files, *extra, timeout: int = 300):
    inventory, known = files
    return subprocess.run(
        ["provision", "setup-cluster", "-i", str(inventory), "--known-hosts", str(known), "--json", *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def known_hosts(nodes, node) -> str:
    return nodes.docker_exec(node, "cat", "/etc/ssh/ssh_known_hosts")


def fake_hostname(nodes, node, plain: str, fqdn: str, extra_addresses: str = "") -> None:
    """A root-owned ``hostname`` before the real one on every PATH (root's and the login user's)."""
    script = (
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  -f) echo {shlex.quote(fqdn)} ;;\n"
        f'  -I) echo "$(/bin/hostname -I) {extra_addresses}" ;;\n'
        f"  -s|'') echo {shlex.quote(plain)} ;;\n"
        '  *) exec /bin/hostname "$@" ;;\n'
        "esac\n"
    )
    for folder in ("/usr/local/sbin", "/usr/local/bin"):
        nodes.docker_exec(node, "sh", "-c", f"cat > {folder}/hostname <<'EOF'\n{script}EOF\nchmod 755 {folder}/hostname")


def real_hostname(nodes, node) -> None:
    nodes.docker_exec(node, "rm", "-f", "/usr/local/sbin/hostname", "/usr/local/bin/hostname")


def test_names_and_addresses_a_node_prints_for_itself_never_reach_known_hosts(nodes, files):
    fake_hostname(nodes, "s2", "s2", OUTSIDE[0], " ".join(OUTSIDE[1:]))
    try:
        assert nodes.docker_exec("s2", "sh", "-lc", "hostname -f").strip() == OUTSIDE[0]  # the attack is in place
        done = setup(files, "--tags", "ssh", "--no-verify")
    finally:
        real_hostname(nodes, "s2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    s2_key = nodes.host_keys["s2"].split()[1]
    for node in NODES:
        text = known_hosts(nodes, node)
        assert not any(name in text for name in OUTSIDE), (node, text)
        assert any(line.split()[0].split(",")[0] == "s2" and s2_key in line for line in text.splitlines()), text


def test_a_node_claiming_another_nodes_name_fails_alone_and_the_others_go_on(nodes, files):
    before = {node: known_hosts(nodes, node) for node in ("s1", "s3")}
    fake_hostname(nodes, "s2", "s1", "s1")
    try:
        done = setup(files, "--tags", "ssh", "--no-verify")
    finally:
        real_hostname(nodes, "s2")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    report = json.loads(done.stdout)
    failed = [r for r in report["results"] if r["status"] == "failed"]
    assert {r["host"] for r in failed} == {"s2"}, failed
    message = failed[0]["message"]
    assert "host s2 reports the name or address 's1', which is host s1's" in message and "\n" not in message, message
    recap = {r["host"]: r for r in report["recap"]}
    assert recap["s1"]["failed"] == 0 and recap["s3"]["failed"] == 0, recap
    s2_key = nodes.host_keys["s2"].split()[1]
    for node in ("s1", "s3"):
        text = known_hosts(nodes, node)
        assert text == before[node]  # nothing moved: s2 never got s1's name
        assert not any(line.split()[0].split(",")[0] == "s1" and s2_key in line for line in text.splitlines())


def test_a_users_long_authorized_keys_line_does_not_stall_check_diff(nodes, files):
    # Issue 24, finding 5: a 96 KB line of "password" took 2 min 13 s through the quadratic mask;
    # half a mebibyte would take about an hour. Masking is linear now: the run ends in seconds.
    line = "password" * (1 << 16) + "\n"
    subprocess.run(
        ["docker", "exec", "-i", "-u", "alice", nodes.container("s1"), "sh", "-c", "cat > /home/alice/.ssh/authorized_keys"],
        input=line, text=True, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    done = setup(files, "--tags", "ssh", "--check", "--diff", "--limit", "s1", timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    changed = [r for r in json.loads(done.stdout)["results"] if r["host"] == "s1" and r["status"] == "changed"]
    assert any("authorized_keys" in r["task"] for r in changed), changed  # the diff was computed, over that line
    restored = setup(files, "--tags", "ssh", "--limit", "s1")
    assert restored.returncode == 0, restored.stdout[-3000:]


def test_an_address_that_ends_in_a_newline_is_refused_before_any_node_is_touched(nodes, files, tmp_path):
    inventory, known = files
    text = inventory.read_text()
    port = nodes.ports["s2"]
    block_scalar = f"  s2:\n    address: |\n      127.0.0.1\n    port: {port}\n"  # the value is "127.0.0.1\n"
    broken = text.replace(f"  s2: {{address: 127.0.0.1, port: {port}}}\n", block_scalar)
    assert broken != text
    block = tmp_path / "hosts.yml"
    block.write_text(broken)
    before = {node: known_hosts(nodes, node) for node in NODES}
    done = setup((block, known), "--tags", "ssh", "--no-verify")
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr
    assert str(block) in done.stderr and "address" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert {node: known_hosts(nodes, node) for node in NODES} == before
