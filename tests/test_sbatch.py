"""`provision launch --format sbatch` (provision.launch.sbatch): the batch script, run by a real sh.

The script is run here with sh, a TEST STAND-IN `mpirun` first on PATH that keeps its arguments
and the rank file it was given: the here-documents must write the rank file byte for byte and
the mpirun line must be the plan's. tests/test_sbatch_cluster.py runs it with sbatch.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess

import pytest
from test_launch_mpirun import host, plan

from provision.launch.mpirun import allocation_hostfile, mpirun_argv
from provision.launch.sbatch import sbatch_script
from provision.plans.dims import parse_dims
from provision.plans.rankfile import plan_rankfile, render_rankfile

STAND_IN = """#!/bin/sh
# TEST STAND-IN for mpirun (tests/test_sbatch.py): records its arguments and the files they name.
printf '%s\\n' "$@" >"$OUT/argv"
for word in "$@"; do f=${word#rankfile:file=}; [ ! -f "$f" ] || cp "$f" "$OUT/$(basename "$f")"; done
"""


def script_of(the_plan, command=("python", "train.py", "--lr", "0.1 $(id)"), version5=False):
    rankfile = render_rankfile(the_plan, "2024-01-01 00:00:00")
    hosts = allocation_hostfile(the_plan, f"{the_plan.dims}.rf") if version5 else None

    def argv(rf, hf):
        return mpirun_argv(the_plan, rf, list(command), hostfile_path=hf, report_bindings=True)

    return sbatch_script(the_plan, rankfile, argv, "2024-01-01 00:00:00", hosts), rankfile, hosts


def run_script(script: str, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mpirun").write_text(STAND_IN)
    (bin_dir / "mpirun").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out), "TMPDIR": str(tmp_path)}
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    return done, out


def test_the_allocation_is_the_plans():
    script, _, _ = script_of(plan(host("a"), host("b")))
    header = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert header == [
        "#SBATCH --job-name=provision-4x2x1",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=4",
        "#SBATCH --nodelist=a,b",
        "#SBATCH --exclusive",
        "#SBATCH --gres=gpu:4",
    ]
    assert script.startswith("#!/bin/sh\n#SBATCH") and "mpirun -rf inside this allocation" in script


def test_hosts_with_too_few_gpus_get_no_gres_and_a_reason():
    few = dataclasses.replace(host("b"), gpus=host("b").gpus[:2])
    script, _, _ = script_of(plan_rankfile(parse_dims("4x2x1"), [host("a"), few], allow_no_gpu=True))
    assert "--gres" not in script.replace("No --gres", "")
    assert "# No --gres: b has fewer than 4 GPUs (--allow-no-gpu)." in script


def test_run_by_sh_it_writes_the_rank_file_and_runs_the_planned_mpirun(tmp_path):
    script, rankfile, _ = script_of(plan(host("a"), host("b")))
    done, out = run_script(script, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (out / "4x2x1.rf").read_text() == rankfile
    argv = (out / "argv").read_text().splitlines()
    assert argv[:3] == ["-n", "8", "-rf"] and re.fullmatch(rf"{tmp_path}/provision-4x2x1\.\w{{10}}/4x2x1\.rf", argv[3])
    assert argv[-4:] == ["python", "train.py", "--lr", "0.1 $(id)"] and "--report-bindings" in argv
    # The private folder is gone once mpirun ends.
    assert not list(tmp_path.glob("provision-4x2x1.*"))


def test_openmpi_5_gets_its_hostfile_from_a_here_document_too(tmp_path):
    five = [dataclasses.replace(h, openmpi=dataclasses.replace(h.openmpi, version="5.0.7")) for h in (host("a"), host("b"))]
    script, rankfile, hosts = script_of(plan(*five), version5=True)
    done, out = run_script(script, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (out / "4x2x1.rf").read_text() == rankfile and (out / "4x2x1.hosts").read_text() == hosts
    argv = (out / "argv").read_text().splitlines()
    assert argv[2] == "--map-by" and argv[3].startswith("rankfile:file=") and argv[4] == "--hostfile"


def test_the_here_document_delimiter_is_new_each_time():
    first, second = (script_of(plan(host("a"), host("b")))[0] for _ in range(2))
    delimiters = [re.search(r"<<'(PROVISION_EOF_[0-9a-f]{16})'", s).group(1) for s in (first, second)]
    assert delimiters[0] != delimiters[1]


@pytest.mark.parametrize("name", ["Tesla V100\nPROVISION_EOF_x\nrm -rf ~", "GPU'; id; '"])
def test_node_text_in_the_rank_file_comments_stays_inside_the_here_document(tmp_path, name):
    hostile = dataclasses.replace(host("a"), gpus=tuple(dataclasses.replace(g, name=name) for g in host("a").gpus))
    script, rankfile, _ = script_of(plan(hostile, host("b")))
    done, out = run_script(script, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (out / "4x2x1.rf").read_text() == rankfile
