"""provision.toml, ~/.config/provision/config.toml and PROVISION_*: command line > environment > config > default."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import run_in_process
from provision.cli import config


def cli(tmp_path, *args, env=None):
    """The command (in process) in ``tmp_path`` with a clean environment (no PROVISION_*, HOME here)."""
    base: dict[str, str | None] = {k: None for k in os.environ if k.startswith("PROVISION_") or k == "XDG_CONFIG_HOME"}
    base["HOME"] = str(tmp_path / "home")
    return run_in_process(*args, cwd=tmp_path, env={**base, **(env or {})})


@pytest.fixture
def capture(tmp_path):
    shutil.copytree("tests/fixtures/captures/node-container", tmp_path / "cap" / "n1")
    return tmp_path / "cap"


def test_precedence_cli_over_env_over_config_over_default(tmp_path, capture):
    (tmp_path / "provision.toml").write_text('facts_dir = "from-config"\n')
    user = tmp_path / "home" / ".config" / "provision"
    user.mkdir(parents=True)
    (user / "config.toml").write_text('facts_dir = "/nonexistent/user-level"\nforks = 3\n')
    done = cli(tmp_path, "probe", "--replay", str(capture))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "from-config" / "n1.json").exists()  # the project file wins over the user's
    done = cli(tmp_path, "probe", "--replay", str(capture), env={"PROVISION_FACTS_DIR": "from-env"})
    assert done.returncode == 0 and (tmp_path / "from-env" / "n1.json").exists(), done.stderr
    done = cli(tmp_path, "probe", "--replay", str(capture), "--facts-dir", "from-cli", env={"PROVISION_FACTS_DIR": "from-env"})
    assert done.returncode == 0 and (tmp_path / "from-cli" / "n1.json").exists(), done.stderr


def test_bad_config_is_one_line_naming_file_and_key(tmp_path):
    (tmp_path / "provision.toml").write_text("forks = 0\n")
    done = cli(tmp_path, "probe", "localhost", "--no-save")
    assert done.returncode == 2 and "provision.toml: forks = 0" in done.stderr and "Traceback" not in done.stderr
    (tmp_path / "provision.toml").write_text('inventroy = "x.yml"\n')
    done = cli(tmp_path, "probe", "localhost", "--no-save")
    assert done.returncode == 2 and "unknown key 'inventroy'" in done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_provision_toml_someone_else_owns_is_refused(tmp_path):
    """The current folder may be shared: another user's provision.toml could name an ssh_config
    whose ProxyCommand runs as you. Refused, one line naming it; a link to it too."""
    (tmp_path / "provision.toml").write_text('ssh_config = "evil_config"\n')
    os.chown(tmp_path / "provision.toml", 4242, 4242)
    done = cli(tmp_path, "probe", "localhost", "--no-save")
    assert done.returncode == 2 and "provision.toml: owned by uid 4242" in done.stderr and "yours or root's" in done.stderr
    (tmp_path / "provision.toml").rename(tmp_path / "theirs.toml")
    (tmp_path / "provision.toml").symlink_to(tmp_path / "theirs.toml")
    done = cli(tmp_path, "probe", "localhost", "--no-save")
    assert done.returncode == 2 and "provision.toml: " in done.stderr and "link" in done.stderr, done.stderr


def test_inventory_from_env_and_paths_relative_to_the_config_file(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "cluster.yml").write_text("hosts: {w1: {address: 192.0.2.1}}\n")
    (site / "conf.toml").write_text('inventory = "cluster.yml"\n')
    done = cli(tmp_path, "inventory", "show", env={"PROVISION_CONFIG": str(site / "conf.toml")})
    assert done.returncode == 0 and "192.0.2.1" in done.stdout, done.stderr
    done = cli(tmp_path, "inventory", "show", env={"PROVISION_INVENTORY": str(site / "cluster.yml")})
    assert done.returncode == 0 and "192.0.2.1" in done.stdout, done.stderr
    monkeypatch.setenv("PROVISION_CONFIG", str(site / "conf.toml"))
    assert config.configured("inventory") == site / "cluster.yml"
    assert config.configured("forks") == config.SETTINGS["forks"].default


def test_shell_completion_is_offered():
    done = subprocess.run(["provision", "--show-completion", "bash"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "_provision_completion" in done.stdout, done.stderr
    env = {**os.environ, "_PROVISION_COMPLETE": "complete_bash", "COMP_WORDS": "provision inv", "COMP_CWORD": "1"}
    done = subprocess.run(["provision"], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.split() == ["inventory"]


def test_setup_cluster_reads_command_timeout_as_every_command_does(tmp_path, monkeypatch):
    """--command-timeout means one thing everywhere (issue 25): setup-cluster now reads
    PROVISION_COMMAND_TIMEOUT and the config files too (it ignored both), for its SSH commands and
    for each change alike."""
    done = cli(tmp_path, "setup-cluster", "-i", "missing.yml", env={"PROVISION_COMMAND_TIMEOUT": "soon"})
    assert done.returncode == 2 and "--command-timeout" in done.stderr and "soon" in done.stderr, done.stderr
    import provision.cluster_setup

    seen = {}

    class Stop(Exception):
        pass

    def capture(self, request, connection, **kwargs):
        seen["timeout"] = connection.ssh.command_timeout
        raise Stop

    monkeypatch.setattr(provision.cluster_setup.ClusterSetup, "__init__", capture)
    (tmp_path / "provision.toml").write_text("command_timeout = 42\n")
    done = cli(tmp_path, "setup-cluster", "-i", "missing.yml")
    assert seen == {"timeout": 42.0} and "Stop" in done.stderr
    done = cli(tmp_path, "setup-cluster", "-i", "missing.yml", env={"PROVISION_COMMAND_TIMEOUT": "7.5"})
    assert seen == {"timeout": 7.5}
