"""Issue 34, item 6: secrets and generated files never land in a checkout by default. Following
the quick start inside this checkout leaves the site's inventory folder (a Jupyter password in
secrets/, installers, keys, facts, the host cache) and launch's rank files, hostfiles and wrappers:
git ignores every one (asked of git itself); and setup-cluster warns about a password file that a
git work tree would take in, with a command that ignores it when pasted."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="git is not installed")

GENERATED = [
    "inventory/hosts.yml",
    "inventory/secrets/alice.jupyter",
    "inventory/installers/Anaconda3-2024.10-1-Linux-x86_64.sh",
    "inventory/keys/alice.pub",
    "inventory/facts/node01.json",
    "inventory/facts/node01/lscpu.txt",
    "inventory/.provision-cache/hosts/node01.json",
    "inventory/group_vars/all.yml",
    "2x3x1.rf",
    "2x3x1.hosts",
    "2x3x1.nic.sh",
]


def git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, env=env)


def test_what_the_quick_start_leaves_in_this_checkout_is_ignored(tmp_path):
    # The checkout's .gitignore in a work tree of its own (the suite may run from a copy without .git).
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    (tmp_path / "inventory").mkdir()
    shutil.copy(ROOT / "inventory" / "hosts.example.yml", tmp_path / "inventory" / "hosts.example.yml")
    assert git(tmp_path, "init", "-q").returncode == 0
    for name in GENERATED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n")
    git(tmp_path, "add", "-A")
    staged = git(tmp_path, "diff", "--cached", "--name-only").stdout.split()
    assert sorted(staged) == [".gitignore", "inventory/hosts.example.yml"], staged  # one `git add -A` takes none of them


def test_a_password_file_git_would_take_in_is_warned_and_the_hint_ignores_it(tmp_path):
    site = tmp_path / "site"
    (site / "inventory" / "secrets").mkdir(parents=True)
    assert git(site, "init", "-q").returncode == 0
    (site / "inventory" / "secrets" / "alice.jupyter").write_text("hers\n")
    (site / "inventory" / "hosts.yml").write_text(
        "hosts:\n  n1: {address: 127.0.0.1, port: 1}\nvars:\n  cluster_users:\n"
        "    - {name: alice, uid: 2001, jupyter_port: 8888, jupyter_password_file: secrets/alice.jupyter}\n"
    )
    done = run_cli("setup-cluster", "--syntax-check", "--tags", "jupyter", cwd=site)
    assert done.returncode == 0, done.stderr
    warning = " ".join(done.stderr.split())
    assert f"inventory/secrets/alice.jupyter: a password file inside the git work tree {site}, not ignored there" in warning
    hint = re.search(r"ignore it \((echo .*)\)$", warning)
    assert hint, warning
    pasted = subprocess.run(["sh", "-c", hint.group(1)], cwd=site, capture_output=True, text=True)
    assert pasted.returncode == 0 and (site / ".gitignore").read_text() == "inventory/secrets/\n"
    again = run_cli("setup-cluster", "--syntax-check", "--tags", "jupyter", cwd=site)
    assert again.returncode == 0 and "password file" not in again.stderr, again.stderr
    outside = tmp_path / "elsewhere"  # outside any work tree: nothing to say
    shutil.copytree(site / "inventory", outside / "inventory")
    assert "password file" not in run_cli("setup-cluster", "--syntax-check", "--tags", "jupyter", cwd=outside).stderr
