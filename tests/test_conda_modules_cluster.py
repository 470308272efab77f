"""Issue 26, item 5: conda on PATH as HPC sites do it. The modulefile setup-cluster writes for each
Anaconda prefix (conda_path: module), loaded by Debian's real environment-modules and by real Lmod
(tests/cluster/modules/Dockerfile), and the non-interactive SSH block of that form: the prefix on
PATH for a job user's non-interactive shell (mpirun's orted launch), never for root."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from provision.playbook.model import load_playbook
from provision.resources import resource_dir
from provision.templating import render_template, render_value, template_loader

pytestmark = pytest.mark.cluster

ANACONDA = [{"prefix": "/opt/anaconda3"}, {"prefix": "/opt/anaconda2"}]
INITS = {"environment-modules": "/usr/share/modules/init/bash", "lmod": "/usr/share/lmod/lmod/init/bash"}


@pytest.fixture(scope="module")
def modulefiles(tmp_path_factory) -> Path:
    subprocess.run(["bash", str(Path(__file__).parent / "cluster" / "ensure-modules-image.sh")], check=True)
    folder = tmp_path_factory.mktemp("modulefiles")
    env = template_loader([])
    for item in ANACONDA:
        name = item["prefix"].rsplit("/", 1)[1]
        (folder / name).write_text(render_template(env, "conda-modulefile.j2", {"item": item, "anaconda": ANACONDA}))
    return folder


def in_node(folder: Path, script: str, user: str = "root", modules: str = "environment-modules") -> subprocess.CompletedProcess:
    """``script`` in bash (no rc files) as ``user`` in a container of the ``modules`` image, the modulefiles at /m."""
    command = ["runuser", "-u", user, "--", "bash", "--norc", "--noprofile", "-c", script]
    return subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "-v",
            f"{folder}:/m:ro",
            "--entrypoint",
            command[0],
            f"provision-modules:{modules}",
            *command[1:],
        ],
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize("implementation", sorted(INITS))
def test_the_modulefile_loads_with_the_real_module_command(modulefiles, implementation):
    use = f". {INITS[implementation]} && module use /m && module load anaconda3"
    done = in_node(modulefiles, use + ' && echo "PATH=$PATH"', modules=implementation)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("PATH=/opt/anaconda3/bin:"), done.stdout
    # Two prefixes never on PATH together: each modulefile conflicts with the other.
    both = in_node(modulefiles, use + ' && module load anaconda2; echo "PATH=$PATH"', modules=implementation)
    assert "/opt/anaconda2/bin" not in both.stdout, both.stdout + both.stderr
    assert "anaconda3" in both.stderr and "onflict" in both.stderr.replace("Cannot load", "conflict"), both.stderr
    unloaded = in_node(modulefiles, use + ' && module unload anaconda3 && echo "PATH=$PATH"', modules=implementation)
    assert unloaded.returncode == 0 and "/opt/anaconda3/bin" not in unloaded.stdout, unloaded.stdout + unloaded.stderr


def test_the_non_interactive_block_of_the_module_form_serves_the_job_user_not_root(modulefiles):
    [play] = [p for p in load_playbook(resource_dir("playbooks") / "anaconda.yml")]
    [task] = [t for t in play.tasks if t.op == "block_top"]
    block = render_value(task.args["block"], {"conda_path": "module", "anaconda": ANACONDA})
    assert "/opt/anaconda3/bin" in block
    job = in_node(modulefiles, block + '\necho "PATH=$PATH"', user="mpi")
    assert job.returncode == 0 and job.stdout.strip().startswith("PATH=/opt/anaconda3/bin:"), job.stdout + job.stderr
    root = in_node(modulefiles, block + '\necho "PATH=$PATH"')
    assert root.returncode == 0 and "/opt/anaconda3" not in root.stdout, root.stdout
