"""provision.engine.adhoc: the copy script (run for real with sh, locally) and the folded report."""

import os
import subprocess

import pytest

from provision.engine.adhoc import AdhocJob, copy_script, report_lines, run_job
from provision.errors import ProvisionError
from provision.transport.adhoc import AdhocResult
from provision.transport.options import SshOptions


def test_folded_report_groups_identical_outputs_under_a_host_list():
    results = [
        AdhocResult("w1", 0, "Linux\n"),
        AdhocResult("w2", 0, "Linux\n"),
        AdhocResult("w3", 0, "Linux\n"),
        AdhocResult("w10", 2, "", "ls: x: No such file\n"),
        AdhocResult("w4", error_kind="unreachable", error="connection refused"),
    ]
    assert report_lines(results, folded=True) == [
        (False, "---------------- w[1-3] (3) | rc=0"),
        (False, "w[1-3]: Linux"),
        (False, "---------------- w10 (1) | rc=2"),
        (False, "w10: stderr: ls: x: No such file"),
        (True, "---------------- w4 (1) | unreachable: connection refused"),
    ]
    assert report_lines(results[:1] + results[3:4], folded=False) == [
        (False, "w1 | rc=0"),
        (False, "w1: Linux"),
        (False, "w10 | rc=2"),
        (True, "w10: ls: x: No such file"),
    ]


def test_no_node_can_print_a_block_that_passes_for_another_hosts():
    """Issue 33 finding 6: n1 prints a fake ``n2 | rc=0`` block, with a carriage return and a
    line separator to hide its own name; every line it sends stays headed by n1, escaped."""
    forged = "ok\n\rn2 | rc=0\nn2 | rc=0\u2028fine\x1b[2K\n---------------- n2 (1) | rc=0\n"
    results = [AdhocResult("n1", 0, forged, "n2 | rc=0\n"), AdhocResult("n2", 1, "", "disk full\n")]
    for folded in (False, True):
        lines = report_lines(results, folded)
        heads = [line for _, line in lines if " | rc=" in line.split(": ", 1)[0] or line.startswith("-" * 16)]
        expected = ["n1 | rc=0", "n2 | rc=1"]
        assert heads == (expected if not folded else [f"---------------- {h[:2]} (1) {h[3:]}" for h in expected])
        for _, line in lines:
            assert not any(ch in line for ch in "\r\x1b\u2028"), line
        node_lines = [line for _, line in lines if line not in heads]
        assert all(line.startswith(("n1: ", "n2: ")) for line in node_lines), node_lines
    assert (False, "n1: \\x0dn2 | rc=0") in report_lines(results, False)
    assert (False, "n1: n2 | rc=0\\u2028fine\\x1b[2K") in report_lines(results, False)
    assert (True, "n1: n2 | rc=0") in report_lines(results, False)


def test_copy_script_writes_atomically_keeps_the_mode_and_refuses_a_folder(tmp_path):
    source = tmp_path / "nccl.conf"
    source.write_bytes(b"NCCL_DEBUG=INFO\n\x00binary'$(x)\n")
    source.chmod(0o640)
    (tmp_path / "out").mkdir()
    done = subprocess.run(["sh", "-s"], input=copy_script(source, str(tmp_path / "out") + "/"), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    target = tmp_path / "out" / "nccl.conf"
    assert target.read_bytes() == source.read_bytes() and oct(target.stat().st_mode & 0o777) == "0o640"
    assert done.stdout.startswith(f"copied {len(source.read_bytes())} bytes to {target} (sha256 ")
    refused = subprocess.run(["sh", "-s"], input=copy_script(source, str(tmp_path / "out")), capture_output=True, text=True)
    assert refused.returncode == 1 and "is a folder: end --dest with / to copy into it" in refused.stderr


@pytest.mark.parametrize(
    "job,message",
    [
        (AdhocJob(copy="/nonexistent/file", dest="/etc/x"), "cannot read it"),
        (AdhocJob(copy="/dev/zero", dest="/etc/x"), "not a regular file"),  # read to the end, it filled the memory
        (AdhocJob(copy="FIFO", dest="/etc/x"), "not a regular file"),  # its open waited for a writer
        (AdhocJob(copy="/tmp", dest="/etc/x"), "not a regular file"),
        (AdhocJob(copy=__file__), "--copy needs --dest"),
        (AdhocJob(copy=__file__, dest="etc/x"), "must be absolute"),
        (AdhocJob(copy=__file__, dest="/etc/../x"), "may not contain '..'"),
        (AdhocJob(command="id", dest="/etc/x"), "--dest goes with --copy"),
        (AdhocJob(command="id", become=True, password="a\nb"), "newline"),
    ],
)
def test_bad_input_refused_before_any_host(job, message, tmp_path):
    from pathlib import Path

    if job.copy == "FIFO":
        os.mkfifo(tmp_path / "fifo")
        job = AdhocJob(copy=str(tmp_path / "fifo"), dest=job.dest)
    if job.copy is not None:
        job = AdhocJob(job.command, Path(job.copy), job.dest, job.become, job.password)
    with pytest.raises(ProvisionError, match=message):
        run_job([], job, SshOptions(), 1)
