"""launch/job.py: one mpirun job's files and command, decided once (issue 25: the argv closure and
the file names that lived in the CLI). Facts from the seed's Minsky capture; OpenMPI 5 needs the
hostfile (its rank-file mapping only covers allocated hosts)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from plan_support import minsky
from provision.errors import PlanError
from provision.launch.job import LaunchOptions, launch_output, mpirun_job, sbatch_text
from provision.launch.mpirun import quoted
from provision.plans.dims import parse_dims
from provision.plans.nics import plan_nics
from provision.plans.rankfile import plan_rankfile

NOW = "2026-12-01 15:00:00"


def plan_of(version: str = "4.1.4"):
    host = minsky("minsky")
    host = dataclasses.replace(host, openmpi=dataclasses.replace(host.openmpi, version=version))
    return plan_rankfile(parse_dims("4x1x1"), [host])


def test_local_files_and_their_copies_on_the_first_host_name_the_same_job():
    plan = plan_of("5.0.7")
    job = mpirun_job(plan, plan_nics(plan), LaunchOptions(["hostname"], rankfile=Path("out/job.rf")), NOW)
    assert [(f.what, f.path) for f in job.files] == [
        ("rank file", "out/job.rf"),
        ("hostfile", "out/job.hosts"),
        ("per-rank wrapper", "out/job.nic.sh"),  # each rank's GPU on its socket
    ]
    assert list(job.remote) == ["4x1x1.rf", "4x1x1.hosts", "4x1x1.nic.sh"]
    assert job.remote["4x1x1.rf"] == job.files[0].text and "rank 0=minsky slot=" in job.remote["4x1x1.rf"]
    here, there = job.argv(), job.argv("/tmp/run.x")
    assert "rankfile:file=out/job.rf" in " ".join(here) and "out/job.hosts" in here
    assert "rankfile:file=/tmp/run.x/4x1x1.rf" in " ".join(there) and "/tmp/run.x/4x1x1.hosts" in there


def test_openmpi_4_needs_no_hostfile_and_a_rankfile_named_hosts_keeps_both():
    plan = plan_of("4.1.4")
    job = mpirun_job(plan, plan_nics(plan), LaunchOptions(["hostname"]), NOW)
    assert [f.path for f in job.files] == ["4x1x1.rf", "4x1x1.nic.sh"] and "--hostfile" not in job.argv()
    v5 = plan_of("5.0.7")
    job = mpirun_job(v5, plan_nics(v5), LaunchOptions(["hostname"], rankfile=Path("x.hosts")), NOW)
    assert [f.path for f in job.files] == ["x.hosts", "x.hosts.hosts", "x.nic.sh"]


def test_bad_options_refused_before_anything_is_written():
    plan = plan_of()
    with pytest.raises(PlanError, match="no command to launch"):
        mpirun_job(plan, plan_nics(plan), LaunchOptions([]), NOW)
    with pytest.raises(PlanError, match="--dev-sync and --dump-iter need --ddl-mode"):
        mpirun_job(plan, plan_nics(plan), LaunchOptions(["t"], dev_sync=1), NOW)
    with pytest.raises(PlanError, match="--dev-sync and --dump-iter need --ddl-mode"):
        sbatch_text(plan, plan_nics(plan), LaunchOptions(["t"], dump_iter=3), NOW)


def test_launch_output_in_each_form_files_first_then_what_is_printed():
    plan = plan_of("4.1.4")
    nics, options = plan_nics(plan), LaunchOptions(["python", "train.py"])
    plain, job = launch_output(plan, nics, options, None, NOW)
    assert job is not None and plain.files == tuple(job.files) and plain.notes == ()
    assert plain.command == quoted(job.argv()) + "\n"
    horovod, none = launch_output(plan, nics, options, "horovod", NOW)
    assert none is None and horovod.command.startswith("horovodrun") and horovod.files[0].path == "4x1x1.rf"
    batch, none = launch_output(plan, nics, options, "sbatch", NOW)
    assert none is None and batch.files == () and batch.command.startswith("#!/bin/sh\n#SBATCH --job-name=provision-4x1x1\n")
    with pytest.raises(PlanError, match=r"--ddl-mode, --dev-sync and --dump-iter are DDL's \(mpirun -ddl\): --format horovod"):
        launch_output(plan, nics, LaunchOptions(["t"], ddl_mode="n"), "horovod", NOW)
