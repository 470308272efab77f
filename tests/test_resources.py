"""Templates and playbooks are found from a checkout and from a pip-installed wheel.

The wheel is installed as a user installs it: into a fresh virtualenv that sees no system
site-packages, with its dependencies. An undeclared dependency (click, once) fails here.
"""

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from provision.resources import render, resource_dir

ROOT = Path(__file__).resolve().parent.parent


def test_checkout_or_install_layout():
    assert (resource_dir("templates") / "commands" / "gather.sh.j2").exists()
    assert resource_dir("playbooks").is_dir()
    assert render("gather.sh.j2", mode="dir", steps=(), nonce="", version="x").startswith("#!/bin/sh")


def _build_wheel(tmp_path_factory) -> Path:
    """provision's wheel, built from this checkout."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)], check=True)
    (built,) = dist.glob("provision-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv (no system site-packages) with the wheel and its dependencies; returns its folder.

    Under tests/run.sh that is the venv the suite runs in (PROVISION_TEST_VENV, made the same way);
    otherwise one is made here, once for this module.
    """
    if os.environ.get("PROVISION_TEST_VENV"):
        return Path(os.environ["PROVISION_TEST_VENV"])
    wheel = _build_wheel(tmp_path_factory)
    env_dir = tmp_path_factory.mktemp("wheel-venv")
    venv.create(env_dir, system_site_packages=False, with_pip=True)
    subprocess.run([env_dir / "bin" / "python", "-m", "pip", "install", "-q", str(wheel)], check=True)
    return env_dir


def run_in(env_dir: Path, cwd: Path, *command: str) -> subprocess.CompletedProcess:
    """Run ``command`` from the venv's bin/ in ``cwd``, with only that venv on PATH."""
    env = {**os.environ, "PATH": f"{env_dir / 'bin'}:/usr/bin:/bin"}
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(env_dir / "bin" / command[0]), *command[1:]], cwd=cwd, env=env, capture_output=True, text=True)


def test_wheel_venv_sees_no_system_packages(installed):
    config = (installed / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in config


def test_wheel_carries_templates_and_playbooks(installed, tmp_path):
    # Run from an empty folder so nothing can come from the checkout.
    code = "import provision.resources as r; print(r.resource_dir('templates'), r.resource_dir('playbooks'))"
    where = run_in(installed, tmp_path, "python", "-c", code)
    assert where.returncode == 0, where.stderr
    paths = where.stdout.split()
    assert len(paths) == 2 and all(path.startswith(str(installed)) and "site-packages" in path for path in paths), paths
    script = run_in(installed, tmp_path, "provision", "capture-script")
    assert script.returncode == 0 and "numactl -H" in script.stdout, script.stderr


def test_installed_wheel_plans_from_replayed_captures(installed, tmp_path):
    captures = str(ROOT / "tests/fixtures/captures")
    probed = run_in(installed, tmp_path, "provision", "probe", "--replay", captures, "minsky", "--facts-dir", "f")
    assert probed.returncode == 0, probed.stderr
    done = run_in(
        installed, tmp_path, "provision", "rankfile", "4x1x1", "--hosts", "minsky", "--facts-dir", "f", "--allow-no-gpu"
    )
    assert done.returncode == 0 and "rank 3=minsky slot=1:5-9" in done.stdout, done.stderr


def test_installed_wheel_reports_an_unknown_option_in_one_line(installed, tmp_path):
    done = run_in(installed, tmp_path, "provision", "probe", "--no-such-option")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "No such option: --no-such-option" in done.stderr, done.stderr
