"""How provision gets installed: the README's first command, and the suite's own install by tests/run.sh."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest

import provision

ROOT = Path(__file__).resolve().parent.parent
UNDER_RUN_SH = pytest.mark.skipif(not os.environ.get("PROVISION_TEST_VENV"), reason="checks tests/run.sh's install; run by it")


def readme_command(number: int) -> str:
    """The command under ``# <number>.`` in the README's first ``sh`` block (comment lines skipped)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.DOTALL).group(1)
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# {number}."))
    return next(line for line in lines[start + 1 :] if line.strip() and not line.lstrip().startswith("#"))


@UNDER_RUN_SH
def test_suite_runs_against_the_installed_wheel():
    venv = Path(os.environ["PROVISION_TEST_VENV"]).resolve()
    package = Path(provision.__file__).resolve()
    assert package.is_relative_to(venv) and "site-packages" in package.parts, package  # not the checkout's provision/
    assert Path(sys.prefix).resolve() == venv
    assert shutil.which("provision") == str(venv / "bin" / "provision")  # what the CLI tests run
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    direct_url = json.loads(distribution("provision").read_text("direct_url.json"))
    assert direct_url["url"].endswith(".whl") and "editable" not in json.dumps(direct_url), direct_url
    assert Path(direct_url["url"].removeprefix("file://")).name == Path(os.environ["PROVISION_TEST_WHEEL"]).name


def checkout_copy(target: Path) -> Path:
    """What a user's clone holds for command 1: pyproject, README, install.sh and the package."""
    target.mkdir()
    for name in ("pyproject.toml", "README.md", "install.sh", "inventory/hosts.example.yml"):  # what the build reads
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target / name)
    for name in ("provision", "templates", "playbooks"):
        shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_readme_first_command_works_in_a_fresh_copy(tmp_path):
    """README command 1, run literally in a copy of the checkout: venv, install with dependencies, probe."""
    command = readme_command(1)
    assert command == "sh install.sh", command
    script = (ROOT / "install.sh").read_text()
    assert "-m pip install -q ." in script and "probe localhost" in script
    copy = checkout_copy(tmp_path / "provision")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(["bash", "-c", command], cwd=copy, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "socket 0: cores 0-" in done.stdout and "slot=0:0-" in done.stdout, done.stdout
    assert "include-system-site-packages = false" in (copy / ".venv" / "pyvenv.cfg").read_text()


FRESH_IMAGE = "provision-fresh:test"  # Debian 12 (debootstrap bookworm): no python3-venv, empty apt lists, sudo


@pytest.mark.cluster
@pytest.mark.parametrize("user", ["root", "mpi"])
def test_first_command_on_a_fresh_debian_12_as_root_and_as_a_sudo_user(tmp_path, user):
    """Issue 15: on a fresh Debian 12 `python3 -m venv` fails ("ensurepip is not available"); README
    command 1 installs python3-venv (with sudo as the user mpi, who may sudo), makes the venv and
    probes; the system Python gets nothing. Ubuntu 24.04 cannot be had here (no registry, no
    Ubuntu archive for debootstrap): not tested."""
    subprocess.run(["bash", str(ROOT / "tests" / "cluster" / "ensure-fresh-image.sh")], check=True)
    home = "/root" if user == "root" else f"/home/{user}"
    name = f"provfresh-install-{os.getpid()}-{user}"
    subprocess.run(["docker", "run", "-d", "--rm", "--name", name, FRESH_IMAGE, "sleep", "1200"], check=True, capture_output=True)
    try:

        def inside(script: str, as_user: str = user, timeout: int = 600) -> subprocess.CompletedProcess:
            return subprocess.run(
                [
                    "docker",
                    "exec",
                    "-u",
                    as_user,
                    "-e",
                    "PIP_CERT=/tmp/ca.crt",
                    "-w",
                    f"{home}/provision",
                    name,
                    "sh",
                    "-c",
                    script,
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
            )

        subprocess.run(["docker", "cp", str(checkout_copy(tmp_path / "provision")), f"{name}:{home}/provision"], check=True)
        # pip in a container cannot verify PyPI's certificate without the host's CA bundle (a test matter)
        subprocess.run(["docker", "cp", "/etc/ssl/certs/ca-certificates.crt", f"{name}:/tmp/ca.crt"], check=True)
        subprocess.run(["docker", "exec", name, "chown", "-R", f"{user}:", f"{home}/provision", "/tmp/ca.crt"], check=True)
        before = inside("python3 -m venv /tmp/v 2>&1; true")
        assert "ensurepip is not available" in " ".join(before.stdout.split()), before.stdout  # the issue, as it is

        done = inside(readme_command(1))
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        assert "installing python3-venv with apt-get" in done.stderr
        assert "socket 0: cores 0-" in done.stdout and "slot=0:0-" in done.stdout, done.stdout
        check = inside(
            "grep -x 'include-system-site-packages = false' .venv/pyvenv.cfg && stat -c %U .venv/bin/provision && "
            "cd / && ! python3 -c 'import provision' 2>/dev/null && ! python3 -m pip --version 2>/dev/null && "
            "echo system-python-clean"
        )
        assert check.stdout.split() == ["include-system-site-packages", "=", "false", user, "system-python-clean"], check
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
