"""Bad input to the roles: one line, exit 2, before any host is touched (the inventory's hosts are
unreachable, so touching one would give exit 1 instead); the password never printed."""

import hashlib

import pytest
from test_authorized_keys import ED

from conftest import run_cli

INVENTORY = "hosts:\n  n1: {address: 127.0.0.1, port: 1}\n  n2: {address: 127.0.0.1, port: 1}\n"
INSTALLER = b"#!/bin/bash\necho TEST installer\n"
PASSWORD = "never-print-me"


def run(tmp_path, variables: str, *extra, input=None):
    (tmp_path / "installers").mkdir(exist_ok=True)
    (tmp_path / "installers" / "A.sh").write_bytes(INSTALLER)
    (tmp_path / "pw").write_text(PASSWORD + "\n")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY + "vars:\n" + variables)
    done = run_cli("setup-cluster", "-i", str(inventory), "--known-hosts", str(tmp_path / "kh"), *extra, input=input)
    assert PASSWORD not in done.stdout + done.stderr
    return done


SHA = hashlib.sha256(INSTALLER).hexdigest()
USER = "  cluster_users: [{name: alice, uid: 2001, jupyter_port: 8888, jupyter_password_file: pw}]\n"

CASES = [
    (
        "wrong-checksum",
        f"  anaconda: [{{installer: installers/A.sh, sha256: '{'0' * 64}', prefix: /opt/a3}}]\n",
        f"installers/A.sh: sha256 is {SHA}, expected {'0' * 64} (wrong or damaged file)",
    ),
    (
        "wrong-md5",
        "  anaconda: [{installer: installers/A.sh, md5: 'ffffffffffffffffffffffffffffffff', prefix: /opt/a3}]\n",
        "md5 is",
    ),
    (
        "prefix-with-shell",
        f"  anaconda: [{{installer: installers/A.sh, sha256: '{SHA}', prefix: '/opt/a3$(id)'}}]\n",
        "anaconda prefix '/opt/a3$(id)' may only hold letters, digits and ._/+- after a leading /",
    ),
    (
        "channel-with-yaml",
        f"  anaconda: [{{installer: installers/A.sh, sha256: '{SHA}', prefix: /opt/a3, channels: ['defaults', 'a b']}}]\n",
        "conda channel 'a b' may only hold",
    ),
    ("no-checksum", "  anaconda: [{installer: installers/A.sh, prefix: /opt/a3}]\n", "a checksum is required"),
    (
        "missing-installer",
        f"  anaconda: [{{installer: installers/nope.sh, sha256: '{SHA}', prefix: /opt/a3}}]\n",
        "installers/nope.sh: No such file or directory",
    ),
    (
        "unreadable-password-file",
        "  cluster_users: [{name: alice, uid: 2001, jupyter_port: 8888, jupyter_password_file: secrets/none}]\n",
        "jupyter password file",
    ),
    (
        "same-port-two-users",
        "  cluster_users: [{name: alice, uid: 2001, jupyter_port: 8888, jupyter_password_file: pw},"
        " {name: bob, uid: 2002, jupyter_port: 8888, jupyter_password_file: pw}]\n",
        "bob and alice both have jupyter_port 8888",
    ),
    ("all-interfaces-without-tls", USER + "  jupyter_listen: everywhere\n", "listen must be localhost or all"),
    # Issue 33 finding 4: on a TCP port of every interface, only her own certificate tells her server apart
    (
        "all-interfaces-with-the-self-signed-default",
        USER + "  jupyter_listen: all\n",
        "jupyter_listen: all needs jupyter_certfile and jupyter_keyfile for alice: a certificate her browser verifies",
    ),
    ("star-client", "  nfs_server: n1\n  nfs_exports: [{path: /data/x}]\n  nfs_clients: ['*']\n", "* is never allowed"),
    # nfs_clients named at its own line (the value, a trailing newline included, shown escaped)
    (
        "client-network-host-bits",
        "  nfs_server: n1\n  nfs_exports: [{path: /data/x}]\n  nfs_clients: [10.0.0.1/24]\n",
        "hosts.yml:7 (nfs_clients): nfs_clients: network '10.0.0.1/24': 10.0.0.1/24 has host bits set "
        "(did you mean 10.0.0.0/24?)",
    ),
    (
        "client-trailing-newline",
        '  nfs_server: n1\n  nfs_exports: [{path: /data/x}]\n  nfs_clients: ["10.0.0.0/24\\n"]\n',
        "hosts.yml:7 (nfs_clients): nfs_clients: '10.0.0.0/24\\x0a' is not an address, network (10.0.0.0/24) or host name",
    ),
    (
        "client-everyone",
        "  nfs_server: n1\n  nfs_exports: [{path: /data/x}]\n  nfs_clients: [0.0.0.0/0]\n",
        "hosts.yml:7 (nfs_clients): nfs_clients: network '0.0.0.0/0' is every address, like *: never allowed",
    ),
    ("bad-export-path", "  nfs_server: n1\n  nfs_exports: [{path: 'data/x'}]\n  nfs_clients: [10.0.0.1]\n", "must be absolute"),
    (
        "export-path-with-shell-syntax",
        "  nfs_server: n1\n  nfs_exports: [{path: '/data$(touch /tmp/owned)'}]\n  nfs_clients: [10.0.0.1]\n",
        "nfs: export path '/data$(touch /tmp/owned)' may only hold",
    ),
    (
        "unknown-nfs-server",
        "  nfs_server: n7\n  nfs_exports: [{path: /data/x}]\n",
        "hosts.yml:5 (nfs_server): nfs_server n7 is not a host of the inventory (hosts: n1, n2)",
    ),
    # Issue 26: these crashed on the server's later tasks (UndefinedError: 'dict object' has no
    # attribute 'server') while --syntax-check said OK; the message names the user's line.
    ("server-without-exports", "  nfs_server: n1\n", "hosts.yml:5 (nfs_server): nfs_server is n1 but nfs_exports is not set"),
    (
        "exports-typo",
        "  nfs_server: n1\n  nfs_export: [{path: /data/x}]\n",
        "hosts.yml:6: variable nfs_export is read by no task of the playbook; did you mean nfs_exports?",
    ),
    # Issue 34: a typo inside an entry was taken silently (exit 0); now named at its line.
    (
        "cluster-user-key-typo",
        "  cluster_users: [{name: alice, uid: 2001, conda_clonee: true}]\n",
        "hosts.yml:5: cluster_users[0] (alice): unknown key conda_clonee; did you mean conda_clone?",
    ),
    (
        "cluster-user-port-typo",
        "  cluster_users:\n    - name: alice\n      uid: 2001\n      jupyter_prot: 8888\n",
        "hosts.yml:8: cluster_users[0] (alice): unknown key jupyter_prot; did you mean jupyter_port?",
    ),
    (
        "export-key-typo",
        "  nfs_server: n1\n  nfs_exports: [{path: /data/x, mdoe: rw}]\n",
        "hosts.yml:6: nfs_exports[0]: unknown key mdoe; did you mean mode?",
    ),
    (
        "anaconda-key-typo",
        f"  anaconda: [{{installer: installers/A.sh, sha256: '{SHA}', prefix: /opt/a3, min_free: 10}}]\n",
        "hosts.yml:5: anaconda[0]: unknown key min_free; did you mean min_free_mb?",
    ),
    (
        "own-key-option-sshd-skips",
        f"  cluster_users:\n    - name: alice\n      uid: 2001\n      ssh_keys:\n        - 'forward-agent {ED}'\n",
        "hosts.yml:9: cluster_users[0] (alice): ssh_keys[0]: not a public key line "
        "(unknown key option 'forward-agent' (sshd skips such a line))",
    ),
    (
        "own-keys-file-missing",
        "  cluster_users: [{name: alice, uid: 2001, ssh_keys_file: keys/alice.pub}]\n",
        "/keys/alice.pub: No such file or directory",
    ),
    (
        "exports-without-server",
        "  nfs_exports: [{path: /data/x}]\n",
        "hosts.yml:5 (nfs_exports): nfs_exports is set but nfs_server is not",
    ),
]


@pytest.mark.parametrize("variables,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exit_2_before_any_host(tmp_path, variables, message):
    done = run(tmp_path, variables)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr and "None" not in done.stderr
    syntax = run(tmp_path, variables, "--syntax-check")  # the same refusal, never "syntax OK"
    assert syntax.returncode == 2 and message in " ".join(syntax.stderr.split()), syntax.stdout + syntax.stderr


def test_password_file_that_cannot_be_read(tmp_path):
    (tmp_path / "locked").write_text(PASSWORD)
    (tmp_path / "locked").chmod(0)
    import os

    if os.geteuid() == 0:  # root reads anything: a folder stands in for an unreadable file
        (tmp_path / "locked").unlink()
        (tmp_path / "locked").mkdir()
    done = run(tmp_path, "  cluster_users: [{name: alice, uid: 2001, jupyter_port: 8888, jupyter_password_file: locked}]\n")
    assert done.returncode == 2 and f"jupyter password file {tmp_path}/locked:" in done.stderr, done.stderr


def test_no_password_file_needs_the_prompt(tmp_path):
    users = "  cluster_users: [{name: bob, uid: 2002, jupyter_port: 8889}]\n"
    done = run(tmp_path, users)
    assert (
        done.returncode == 2 and "no password for bob: set jupyter_password_file, or run with --ask-jupyter-pass" in done.stderr
    )
    asked = run(tmp_path, users, "--ask-jupyter-pass", "--no-verify", input=PASSWORD + "\n")
    assert asked.returncode == 1 and "unreachable" in asked.stdout  # past the checks: only the hosts are missing


def test_bad_input_found_after_the_handshakes_began_runs_nothing_and_closes_them(tmp_path, monkeypatch):
    """Issue 37: setup-cluster starts its first hosts' SSH handshakes before its own checks, so
    that they overlap; a refusal found by those checks runs no command on any host and abandons
    every connection begun (tests/test_session.py: abandoning closes it), and --syntax-check
    connects to none."""
    from conftest import run_in_process
    from provision.transport.session import Session

    calls = []
    open_ahead, abandon = Session.open_ahead, Session.abandon
    monkeypatch.setattr(Session, "open_ahead", lambda self: (calls.append(("ahead", self.host.name)), open_ahead(self))[1])
    monkeypatch.setattr(
        Session, "abandon", lambda self, wait=0.0: (calls.append(("abandon", self.host.name)), abandon(self, wait))[1]
    )
    monkeypatch.setattr(Session, "run", lambda self, *a, **k: calls.append(("run", self.host.name)))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY + "vars:\n  nfs_server: n1\n  nfs_export: [{path: /data/x}]\n")
    common = ["setup-cluster", "-i", str(inventory), "--known-hosts", str(tmp_path / "kh")]
    done = run_in_process(*common)
    assert done.returncode == 2 and "did you mean nfs_exports?" in done.stderr, done.stderr
    assert set(calls) == {("abandon", "n1"), ("abandon", "n2"), ("ahead", "n1"), ("ahead", "n2")}
    calls.clear()
    assert run_in_process(*common, "--syntax-check").returncode == 2 and calls == []
