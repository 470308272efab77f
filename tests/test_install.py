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


def test_readme_first_command_works_in_a_fresh_copy(tmp_path):
    """README command 1, run literally in a copy of the checkout: venv, install with dependencies, probe."""
    command = readme_command(1)
    assert "pip install" in command and "probe localhost" in command, command
    copy = tmp_path / "provision"
    copy.mkdir()
    for name in ("pyproject.toml", "README.md", "inventory/hosts.example.yml"):  # what the wheel's build reads
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)
    for name in ("provision", "templates", "playbooks"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(["bash", "-c", command], cwd=copy, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "socket 0: cores 0-" in done.stdout and "slot=0:0-" in done.stdout, done.stdout
    assert "include-system-site-packages = false" in (copy / ".venv" / "pyvenv.cfg").read_text()
