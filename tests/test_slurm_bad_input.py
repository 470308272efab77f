"""Issue 36's bad input for the Slurm role, through `provision setup-cluster`: one line naming
it, exit 2, before any node is touched. The inventory's hosts are unreachable (port 1): a run
that touched one would report it unreachable and exit 1, never 2."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from plan_support import minsky

INVENTORY = """defaults: {user: mpi}
hosts:
  head: {address: 127.0.0.1, port: 1}
  node01: {address: 127.0.0.1, port: 1}
  node02: {address: 127.0.0.1, port: 1}
  login: {address: 127.0.0.1, port: 1}
groups:
  gpu: [node01, node02]
  heads: [head, login]
vars:
  slurm: SLURM
"""


def _run(tmp_path, slurm: str, key: tuple[bytes, int] | None = None):
    (tmp_path / "hosts.yml").write_text(INVENTORY.replace("SLURM", slurm))
    (tmp_path / "facts").mkdir()
    for name in ("node01", "node02"):
        (tmp_path / "facts" / f"{name}.json").write_text(json.dumps(minsky(name).to_dict()))
    if key is not None:
        (tmp_path / "secrets").mkdir()
        (tmp_path / "secrets" / "site.key").write_bytes(key[0])
        (tmp_path / "secrets" / "site.key").chmod(key[1])
    return run_cli(
        "setup-cluster", "-i", str(tmp_path / "hosts.yml"), "--known-hosts", str(tmp_path / "kh"), "--tags", "slurm",
        "--connect-timeout", "1",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("slurm", "key", "message"),
    [
        ("{controller: ctl9, nodes: gpu}", None, "slurm: controller: 'ctl9' is no group or host of the inventory"),
        ("{controller: [head, login], nodes: gpu}", None, "slurm: controller names 2 hosts (head, login): give one"),
        ("{controller: heads, nodes: gpu}", None, "slurm: controller names 2 hosts (head, login): give one"),
        ("{controller: head, nodes: [node01, node02, login]}", None, "no facts for host login: looked for"),
        (
            "{controller: head, nodes: gpu, munge_key: secrets/site.key}",
            (b"k" * 128, 0o644),
            "secrets/site.key: mode 0644, not 0400 (chmod 0400 it",
        ),
        (
            "{controller: head, nodes: gpu, munge_key: secrets/site.key}",
            (b"my-passphrase\n", 0o400),
            "secrets/site.key: is 14 bytes: a MUNGE key has at least 32 (munged refuses a shorter one)",
        ),
        (
            "{controller: head, nodes: gpu, munge_key: secrets/site.key}",
            (b"-----BEGIN RSA PRIVATE KEY-----\n" + b"M" * 300 + b"\n-----END RSA PRIVATE KEY-----\n", 0o400),
            "secrets/site.key: holds a PEM or OpenSSH key, not a MUNGE key",
        ),
        ("{controller: head, nodes: gpu, munge_key: secrets/none.key}", None, "secrets/none.key: no such file"),
        (
            '{controller: head, nodes: gpu, health_check: "/usr/sbin/check\\nSlurmdUser=mpi"}',
            None,
            "slurm: health_check must be an absolute path",
        ),
    ],
)
def test_bad_slurm_input_is_one_line_naming_it_exit_2_before_any_node(tmp_path, slurm, key, message):
    done = _run(tmp_path, slurm, key)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert lines[0].startswith(f"provision: error: {tmp_path / 'hosts.yml'}:"), lines  # where the user wrote it
    assert "unreachable" not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert done.stdout.strip() == ""
    if key is not None:  # the key's bytes never appear, even in the refusal
        assert key[0][:12].decode() not in done.stderr


def test_a_good_slurm_inventory_gets_past_the_checks_and_only_then_meets_the_hosts(tmp_path):
    """The same inventory with nothing wrong: the run reaches the hosts (unreachable here: exit 1),
    and the default key was made once, before that."""
    done = _run(tmp_path, "{controller: head, nodes: gpu}")
    assert done.returncode == 1 and "unreachable" in done.stdout + done.stderr, done.stdout + done.stderr
    key = tmp_path / "secrets" / "munge.key"
    assert key.stat().st_mode & 0o7777 == 0o400 and len(key.read_bytes()) == 128
