"""Templates and playbooks are found from a checkout and from a pip-installed wheel."""

import subprocess
import sys
import venv
from pathlib import Path

from provision.resources import render, resource_dir

ROOT = Path(__file__).resolve().parent.parent


def test_checkout_layout():
    assert (resource_dir("templates") / "gather.sh.j2").exists()
    assert resource_dir("playbooks").is_dir()
    assert render("gather.sh.j2", mode="dir", steps=(), nonce="", version="x").startswith("#!/bin/sh")


def test_wheel_carries_templates_and_playbooks(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(ROOT)], check=True)
    (wheel,) = (tmp_path / "dist").glob("provision-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)], check=True)
    # Run from an empty folder so nothing can come from the checkout.
    where = subprocess.run(
        [python, "-c", "import provision.resources as r; print(r.resource_dir('templates'), r.resource_dir('playbooks'))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(str(env_dir) in path for path in where), where
    script = subprocess.run(
        [env_dir / "bin" / "provision", "capture-script"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert "numactl -H" in script.stdout
    rankfile = subprocess.run(
        [env_dir / "bin" / "provision", "probe", "--replay", str(ROOT / "tests/fixtures/captures"), "minsky", "--facts-dir", "f"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert rankfile.returncode == 0, rankfile.stderr
    done = subprocess.run(
        [env_dir / "bin" / "provision", "rankfile", "4x1x1", "--hosts", "minsky", "--facts-dir", "f", "--allow-no-gpu"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "rank 3=minsky slot=1:5-9" in done.stdout, done.stderr
