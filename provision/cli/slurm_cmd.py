"""`provision slurm-gres`: gres.conf (and the slurm.conf lines it needs) from probed facts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from provision import __version__
from provision.cli import command_table, options as opt
from provision.cli.output import error, warn, write_or_print

commands = command_table()


@commands.command(
    "slurm-gres",
    epilog="Examples:\n\n  provision slurm-gres -o /etc/slurm/gres.conf --slurm-conf /etc/slurm/nodes.conf\n\n"
    "  provision slurm-gres gpu -i inventory/hosts.yml      # the hosts of group gpu",
)
def slurm_gres(
    hosts: Annotated[
        list[str],
        typer.Argument(help="Hosts or groups (default: every host of the inventory; without one, every host in --facts-dir)."),
    ] = None,
    *,
    inventory: opt.Inventory,
    facts_dir: opt.FactsDir,
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Write gres.conf here (atomically; an old file is kept as FILE~).")
    ] = None,
    slurm_conf: Annotated[
        Path,
        typer.Option(
            "--slurm-conf",
            help="Also write the slurm.conf lines gres.conf needs here: GresTypes=gpu and NodeName lines with "
            "Gres=gpu:TYPE:N (for an Include in slurm.conf).",
        ),
    ] = None,
) -> None:
    """gres.conf from probed GPUs: one line per GPU with Slurm's logical Cores=, hosts alike folded into hostlists.

    A host whose GPUs are unknown (nvidia-smi failed) is left out with an error line (exit 1);
    a GPU whose socket is unknown gets no Cores= and a warning.
    """
    from provision.cli.plan_cmd import facts_of
    from provision.plans.gres import plan_gres

    facts, errors = facts_of(hosts, inventory, facts_dir)
    plan = plan_gres(facts, __version__)
    for note in plan.notes:
        warn(note)
    for problem in [*errors, *plan.errors]:
        error(problem)
    write_or_print(plan.gres_conf, output, "gres.conf")
    if slurm_conf is not None:
        write_or_print(plan.slurm_conf, slurm_conf, "slurm.conf lines")
    if errors or plan.errors:
        raise typer.Exit(1)
