"""doctor/service.py: the hosts and checked settings of one `provision doctor` run, decided below
the command line (--user and --dataset checked once; the inventory's Anaconda prefixes found)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from provision.doctor.service import doctor_request
from provision.errors import ProvisionError
from provision.transport.options import SshOptions

CONNECTION = SimpleNamespace(ssh=SshOptions(command_timeout=7.0), forks=3)


def inventory(tmp_path, extra: str = ""):
    path = tmp_path / "hosts.yml"
    path.write_text("hosts:\n  w1: {}\n  w2: {}\ngroups:\n  gpu: [w2]\n" + extra)
    return path


def test_hosts_and_settings_of_one_run(tmp_path):
    path = inventory(tmp_path, "vars:\n  anaconda: [{prefix: /opt/anaconda3}]\n")
    targets, settings = doctor_request(path, ["gpu"], CONNECTION, user="alice", datasets=["/data/imagenet/"], deep=True)
    assert [host.name for host in targets] == ["w2"]
    assert settings.ssh.command_timeout == 7.0 and settings.forks == 3 and settings.deep and not settings.fast
    assert settings.user == "alice" and settings.datasets == ("/data/imagenet",)
    assert settings.conda_prefixes == ("/opt/anaconda3",)
    _, default = doctor_request(path, [], CONNECTION)
    assert default.user == "" and default.pairwise_fanout == 8 and default.datasets == ()


@pytest.mark.parametrize(("field", "value"), [("user", "al;ice"), ("datasets", ["data/relative"])])
def test_bad_user_or_dataset_is_refused_before_any_host(tmp_path, field, value):
    with pytest.raises(ProvisionError, match="--user|--dataset"):
        doctor_request(inventory(tmp_path), [], CONNECTION, **{field: value})


def test_where_drain_runs_scontrol(tmp_path):
    from provision.doctor.service import slurm_host

    assert slurm_host(inventory(tmp_path), "w1").name == "w1"
    assert slurm_host(inventory(tmp_path, "vars:\n  slurm: {controller: w2}\n"), None).name == "w2"
    with pytest.raises(ProvisionError, match="--slurm-host HOST"):
        slurm_host(inventory(tmp_path), None)
    with pytest.raises(ProvisionError, match="--slurm-host 'ctl': no such host"):
        slurm_host(inventory(tmp_path), "ctl")


def test_drain_and_node_script_bad_input_is_one_line_exit_2_before_any_host(tmp_path):
    from conftest import run_cli

    path = str(inventory(tmp_path))
    cases = [
        (["--slurm-host", "w1"], "--slurm-host says where --drain runs scontrol: add --drain"),
        (["--drain"], "--drain: say where scontrol runs: --slurm-host HOST"),
        (["--drain", "--slurm-host", "ctl"], "--slurm-host 'ctl': no such host in the inventory"),
        (["--node-script", "-", "--drain"], "--node-script writes the node check from the facts and stops"),
        (["--node-script", "-", "--facts-dir", str(tmp_path / "none")], "w1"),
    ]
    for args, said in cases:
        done = run_cli("doctor", "-i", path, *args)
        assert done.returncode == 2 and said in done.stderr and done.stdout == "", (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
