"""provision.probe.slurm without Slurm: the submit host's script, and how its output is attributed.

The task outputs are this machine's real gather output (the SSH probe's script run with sh),
base64-encoded and labelled as srun --label delivers them; tests/test_probe_slurm_cluster.py
runs the real salloc/srun.
"""

from __future__ import annotations

import base64
import subprocess

import pytest

from conftest import run_cli
from provision.probe.gather import gather_script
from provision.probe.slurm import SlurmProbeError, SlurmRequest, probe_script, results_from_output

NONCE = "0123456789abcdef"


@pytest.fixture(scope="module")
def honest() -> tuple[str, str]:
    """(stdout, stderr) of the real gather script on this machine."""
    done = subprocess.run(["sh", "-s"], input=gather_script(NONCE), capture_output=True, text=True, timeout=120)
    return done.stdout, done.stderr


def labelled(task: int, text: str, prefix: str = "") -> str:
    """``text`` as srun --label prints a task's base64 stream (76 characters a line, after ``prefix``)."""
    encoded = base64.encodebytes(text.encode()).decode()
    return "".join(f"{task}: {prefix}{line}\n" for line in encoded.splitlines())


def stream(nodes: list[str], outputs: dict[int, tuple[str, str]]) -> tuple[str, str]:
    out = f"@@{NONCE}@@ nodes\n {' '.join(nodes)}\n" + "".join(labelled(t, o) for t, (o, _) in outputs.items())
    err = "salloc: Granted job allocation 7\n" + "".join(labelled(t, e, ".") for t, (_, e) in outputs.items())
    return out, err


def test_each_node_gets_its_own_tasks_output_in_allocation_order(honest):
    out, err = stream(["sn1", "sn2", "sn3"], {2: honest, 0: honest, 1: honest})
    results = results_from_output(out, err, 0, NONCE, "ctl", 1.5)
    assert [r.host for r in results] == ["sn1", "sn2", "sn3"]
    assert all(r.ok for r in results), [r.error for r in results]
    assert results[0].facts.cpu == results[2].facts.cpu and results[1].seconds == 1.5


def test_lines_a_node_prints_in_another_tasks_form_stay_its_own(honest):
    stdout, stderr = honest
    forged = labelled(0, f"@@{NONCE}@@ hostname\nforged\n@@{NONCE}@@ .rc 0\n")
    # Task 2 printed "0: <base64>" lines; srun labels them "2: 0: ...".
    out, err = stream(["sn1", "sn2", "sn3"], {0: honest, 1: honest})
    out += "".join(f"2: {line}\n" for line in forged.splitlines()) + labelled(2, stdout)
    results = results_from_output(out, err, 0, NONCE, "ctl", 1.0)
    assert results[0].ok and results[0].facts.hostname == honest_hostname(honest)
    assert results[1].ok
    assert results[2].error_kind == "parse" and "not the base64" in results[2].error


def test_frames_a_node_forges_in_its_own_stream_fail_that_node_only(honest):
    stdout, stderr = honest
    hostile = (f"@@{NONCE}@@ hostname\nforged\n@@{NONCE}@@ .rc 0\n" + stdout, stderr)
    out, err = stream(["a", "b"], {0: honest, 1: hostile})
    first, second = results_from_output(out, err, 0, NONCE, "ctl", 1.0)
    assert first.ok and not second.ok and "frame 'hostname' appears twice" in second.error


def test_a_task_that_died_or_never_ran_is_named_with_sruns_message(honest):
    stdout, stderr = honest
    out, err = stream(["sn1", "sn2", "sn3"], {0: honest, 1: (died_in_meminfo(stdout), stderr)})
    err += "1: Killed\nsrun: error: sn3: task 2: Exited with exit code 127\n"
    results = results_from_output(out, err, 1, NONCE, "ctl", 1.0)
    assert results[0].ok
    assert results[1].error_kind == "parse" and "output ended inside meminfo" in results[1].error
    assert results[1].error.endswith("(task: 'Killed')")
    assert results[2].error_kind == "slurm" and "no output from its srun task" in results[2].error
    assert "sn3: task 2: Exited with exit code 127" in results[2].error


def test_a_node_name_that_is_no_host_name_names_no_file(honest):
    out, err = stream(["../etc", "sn2"], {0: honest, 1: honest})
    bad, good = results_from_output(out, err, 0, NONCE, "ctl", 1.0)
    assert bad.error_kind == "slurm" and "is not a host name" in bad.error and good.ok


@pytest.mark.parametrize(
    ("stderr", "code", "shown"),
    [
        (
            "salloc: error: invalid partition specified: nope\nsalloc: error: Job submit/allocate failed: x\n",
            2,
            "salloc: error: invalid partition specified: nope",
        ),
        ("salloc: error: Job submit/allocate failed: Invalid node name specified\n", 2, "Invalid node name specified"),
        (
            "salloc: Pending job allocation 5\nsalloc: error: Unable to allocate resources: Connection timed out\n",
            1,
            "salloc: error: Unable to allocate resources: Connection timed out",
        ),
        ("sh: 1: salloc: not found\n", 1, "sh: 1: salloc: not found"),
    ],
)
def test_no_allocation_is_one_line_naming_the_submit_host(stderr, code, shown):
    with pytest.raises(SlurmProbeError) as raised:
        results_from_output("", stderr, 1, NONCE, "login1", 0.1)
    assert raised.value.code == code
    assert str(raised.value).startswith("slurm on login1: no allocation: ") and shown in str(raised.value)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (SlurmRequest(partition="gpu;rm -rf /", nodes=1), "not a Slurm partition name"),
        (SlurmRequest(nodelist="sn[1-3] $(id)"), "not a Slurm host list"),
        (SlurmRequest(nodes=0), "at least 1"),
        (SlurmRequest(partition="gpu"), "say which nodes"),
        (SlurmRequest(nodes=2, wait_seconds=0), "--alloc-wait"),
    ],
)
def test_bad_requests_are_refused_before_anything_runs(request_, message):
    with pytest.raises(SlurmProbeError, match=message) as raised:
        request_.check()
    assert raised.value.code == 2


def test_the_script_keeps_the_nonce_and_user_values_off_command_lines():
    script = probe_script(NONCE)
    assert SlurmRequest(partition="gpu", nodes=3).arguments() == ["gpu", "", "3", "60"]
    command_lines = [line for line in script.splitlines() if line.startswith(("salloc ", "exec srun", "  --kill"))]
    assert command_lines and not any(NONCE in line for line in command_lines)
    # The gather script travels whole inside a quoted here-document (nothing expanded).
    assert f"<<'PROVISION_GATHER_{NONCE}'" in script and gather_script(NONCE).rstrip("\n") in script


def honest_hostname(honest: tuple[str, str]) -> str:
    marker = f"@@{NONCE}@@ hostname\n"
    return honest[0].split(marker, 1)[1].split("\n", 1)[0].strip()


def died_in_meminfo(stdout: str) -> str:
    """The output of a task killed while it ran the meminfo step."""
    marker = f"@@{NONCE}@@ meminfo\n"
    return stdout[: stdout.index(marker) + len(marker)] + "MemTotal:"


def test_the_cli_on_a_controller_without_slurm_says_so_in_one_line(tmp_path):
    done = run_cli("probe", "--via", "slurm", "--nodes", "2", "--facts-dir", str(tmp_path / "facts"))
    assert done.returncode == 1 and not (tmp_path / "facts").exists()
    assert done.stderr.strip() == (
        "provision: error: slurm on localhost: no allocation: provision: salloc: not installed (is this a Slurm submit host?)"
    )


def test_slurm_options_without_via_slurm_are_refused():
    done = run_cli("probe", "localhost", "--partition", "gpu")
    assert done.returncode == 2 and "add --via slurm" in done.stderr
