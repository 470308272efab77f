"""`provision slurm-nodes` and `provision slurm-gres`: slurm.conf's node lines, and gres.conf (with
the slurm.conf lines it needs), from probed facts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from provision import __version__
from provision.cli import command_table, options as opt
from provision.cli.output import error, fail, warn, write_or_print

commands = command_table()
HostsArgument = Annotated[
    list[str],
    typer.Argument(help="Hosts or groups (default: every host of the inventory; without one, every host in --facts-dir)."),
]


@commands.command(
    "slurm-nodes",
    epilog="Examples:\n\n  provision slurm-nodes gpu > nodes.conf && cat nodes.conf >> /etc/slurm/slurm.conf\n\n"
    "  provision slurm-nodes -i inventory/hosts.yml all",
)
def slurm_nodes(
    hosts: HostsArgument = None,
    *,
    inventory: opt.Inventory,
    facts_dir: opt.FactsDir,
) -> None:
    """slurm.conf NodeName lines from facts, in slurmd -C's format, with Gres=gpu:N.

    All or nothing: every host's facts are read first, and nothing is printed unless all of them
    are there, so a failed run appended to slurm.conf leaves no partial list behind."""
    from provision.plans.service import slurm_nodes as node_lines

    found = node_lines(hosts or [], inventory, facts_dir)
    if found.problems:
        for problem in found.problems[:-1]:
            error(problem)
        counted = f" ({len(found.problems)} of {found.hosts} hosts have no usable facts)" if found.hosts > 1 else ""
        raise fail(f"{found.problems[-1]}{counted}; nothing printed")
    for line in found.lines:
        typer.echo(line)
    for note in found.notes:
        warn(note)


@commands.command(
    "slurm-gres",
    epilog="Examples:\n\n  provision slurm-gres -o /etc/slurm/gres.conf --slurm-conf /etc/slurm/nodes.conf\n\n"
    "  provision slurm-gres gpu -i inventory/hosts.yml      # the hosts of group gpu",
)
def slurm_gres(
    hosts: HostsArgument = None,
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
    from provision.plans.service import gres

    plan, errors = gres(hosts or [], inventory, facts_dir, __version__)
    for note in plan.notes:
        warn(note)
    for problem in [*errors, *plan.errors]:
        error(problem)
    write_or_print(plan.gres_conf, output, "gres.conf")
    if slurm_conf is not None:
        write_or_print(plan.slurm_conf, slurm_conf, "slurm.conf lines")
    if errors or plan.errors:
        raise typer.Exit(1)
