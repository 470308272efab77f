"""`provision launch --format sbatch`: a launch plan as a Slurm batch script (templates/commands/sbatch.sh.j2).

The allocation is the plan's: ``--nodes`` (Y·Z), ``--ntasks-per-node`` (X), ``--nodelist`` (the
planned hosts, which the rank file names), ``--exclusive`` (the rank file binds across whole
nodes) and ``--gres=gpu:X`` when every host has X GPUs. The binding is ``mpirun -rf`` inside the
allocation, with the rank file (and OpenMPI 5's hostfile) written from here-documents into a
private ``mktemp -d`` folder on the batch host; the script's own comment says why not srun's.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Callable

from provision import __version__
from provision.errors import PlanError
from provision.plans.rankfile import RankPlan
from provision.resources import render

__all__ = ["RANKFILE_WORD", "HOSTFILE_WORD", "sbatch_script"]

# The paths mpirun is given inside the script: words the script's shell expands.
RANKFILE_WORD = "PROVISION_RANKFILE_PATH"
HOSTFILE_WORD = "PROVISION_HOSTFILE_PATH"


def _gres(plan: RankPlan) -> tuple[int, str]:
    """(GPUs per node to request, 0 for none; why none)."""
    short = [facts.host for facts in plan.facts if len(facts.gpus) < plan.dims.x]
    if short:
        return 0, f"{', '.join(short[:3])} ha{'s' if len(short) == 1 else 've'} fewer than {plan.dims.x} GPUs (--allow-no-gpu)"
    return plan.dims.x, ""


def _shell_word(word: str, paths: dict[str, str]) -> str:
    """``word`` quoted for sh, a path word in it (``rankfile:file=PATH`` too) left for sh to expand."""
    for token, path in paths.items():
        if token in word:
            before, after = word.split(token, 1)
            return (shlex.quote(before) if before else "") + path + (shlex.quote(after) if after else "")
    return shlex.quote(word)


def sbatch_script(
    plan: RankPlan,
    rankfile_text: str,
    mpirun: Callable[[str, str | None], list[str]],
    generated_at: str,
    hostfile_text: str | None = None,
) -> str:
    """The batch script; ``mpirun(rankfile, hostfile)`` gives the mpirun argv for those paths."""
    dims = str(plan.dims)
    paths = {RANKFILE_WORD: f'"$work/{dims}.rf"', HOSTFILE_WORD: f'"$work/{dims}.hosts"'}
    argv = mpirun(RANKFILE_WORD, HOSTFILE_WORD if hostfile_text is not None else None)
    line = " ".join(_shell_word(word, paths) for word in argv)
    files = [(f"{dims}.rf", rankfile_text)] + ([(f"{dims}.hosts", hostfile_text)] if hostfile_text is not None else [])
    delimiter = f"PROVISION_EOF_{secrets.token_hex(8)}"
    for _, text in files:
        if delimiter in text.splitlines():  # cannot happen by chance: 64 random bits
            raise PlanError("a rank file line equals the here-document delimiter; run again")
    gpus, no_gpu_reason = _gres(plan)
    return (
        render(
            "sbatch.sh.j2",
            plan=plan,
            gpus=gpus,
            no_gpu_reason=no_gpu_reason,
            files=[(name, text if text.endswith("\n") else text + "\n") for name, text in files],
            delimiter=delimiter,
            mpirun=line,
            version=__version__,
            generated_at=generated_at,
        )
        + "\n"
    )
