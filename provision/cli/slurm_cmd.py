"""`provision slurm-gres`: gres.conf (and the slurm.conf lines it needs) from probed facts."""

from __future__ import annotations

from pathlib import Path

import typer

from provision import __version__
from provision.cli import app, options as opt, stderr
from provision.cli.plan_cmd import _write_or_print, fact_host_names
from provision.errors import FactsError
from provision.facts.model import HostFacts
from provision.files import write_atomic
from provision.plans.gres import plan_gres
from provision.probe.store import load_host

HOSTS_ARG = typer.Argument(
    None, help="Hosts or groups (default: every host of the inventory; without one, every host in --facts-dir)."
)


def facts_of(patterns: list[str] | None, inventory: Path | None, facts_dir: Path) -> tuple[list[HostFacts], list[str]]:
    """Facts of the named hosts and groups (none named: the inventory's hosts, as slurm-nodes), and
    one error line per host without."""
    names = fact_host_names(patterns, inventory, facts_dir)
    found, errors = [], []
    for name in names:
        try:
            found.append(load_host(facts_dir, name))
        except FactsError as error:
            errors.append(str(error))
    return found, errors


@app.command(
    "slurm-gres",
    epilog="Examples:\n\n  provision slurm-gres -o /etc/slurm/gres.conf --slurm-conf /etc/slurm/nodes.conf\n\n"
    "  provision slurm-gres gpu -i inventory/hosts.yml      # the hosts of group gpu",
)
def slurm_gres(
    hosts: list[str] = HOSTS_ARG,
    inventory: Path = opt.INVENTORY,
    facts_dir: Path = opt.FACTS_DIR,
    output: Path = typer.Option(None, "-o", "--output", help="Write gres.conf here (atomically; an old file is kept as FILE~)."),
    slurm_conf: Path = typer.Option(
        None,
        "--slurm-conf",
        help="Also write the slurm.conf lines gres.conf needs here: GresTypes=gpu and NodeName lines with "
        "Gres=gpu:TYPE:N (for an Include in slurm.conf).",
    ),
) -> None:
    """gres.conf from probed GPUs: one line per GPU with Slurm's logical Cores=, hosts alike folded into hostlists.

    A host whose GPUs are unknown (nvidia-smi failed) is left out with an error line (exit 1);
    a GPU whose socket is unknown gets no Cores= and a warning.
    """
    facts, errors = facts_of(hosts, inventory, facts_dir)
    plan = plan_gres(facts, __version__)
    for note in plan.notes:
        stderr.print(f"warning: {note}", highlight=False, soft_wrap=True, markup=False)
    for error in [*errors, *plan.errors]:
        stderr.print(f"provision: error: {error}", highlight=False, soft_wrap=True, markup=False)
    _write_or_print(plan.gres_conf, output)
    if slurm_conf is not None:
        backup = write_atomic(slurm_conf, plan.slurm_conf)
        stderr.print(
            f"wrote {slurm_conf}" + (f" (previous version kept as {backup})" if backup else ""), highlight=False, markup=False
        )
    if errors or plan.errors:
        raise typer.Exit(1)
