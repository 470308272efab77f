"""`provision doctor` below the command line: the hosts and the checked :class:`DoctorSettings` of
one run, from what the user typed (the run itself is :func:`provision.doctor.runner.doctor`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from provision.doctor.mounts import inventory_exports
from provision.doctor.runner import DoctorSettings
from provision.doctor.sources import anaconda_prefixes, check_dataset, check_job_user
from provision.errors import ProvisionError
from provision.inventory.model import Host, open_inventory
from provision.playbook.variables import Variables
from provision.text import shown_value

if TYPE_CHECKING:
    from provision.doctor.perf import PerfSettings


def doctor_request(
    inventory: Path | None,
    patterns: list[str],
    connection,
    *,
    user: str | None = None,
    datasets: list[str] | None = None,
    deep: bool = False,
    pairwise_fanout: int | None = None,
    perf: PerfSettings | None = None,
) -> tuple[list[Host], DoctorSettings]:
    """The hosts ``patterns`` choose and the settings to check them with; ``connection`` holds
    ``ssh`` and ``forks``. --user and --dataset are checked here, once (ProvisionError: exit 2);
    the inventory's Anaconda prefixes are looked at first, and the inventory's NFS exports must be
    mounted from their server on each client; ``perf``: doctor --perf's settings (checked)."""
    inv = open_inventory(inventory)
    targets = inv.resolve(patterns)
    variables = Variables(inv)  # read once: the Anaconda prefixes and the NFS exports both come from it
    settings = DoctorSettings(
        ssh=connection.ssh,
        user=check_job_user(user) if user else "",
        datasets=tuple(check_dataset(path) for path in datasets or []),
        deep=deep,
        forks=connection.forks,
        conda_prefixes=anaconda_prefixes(variables, targets),
        exports=inventory_exports(variables, targets),
        perf=perf,
        **({"pairwise_fanout": pairwise_fanout} if pairwise_fanout else {}),
    )
    return targets, settings


def slurm_host(inventory: Path | None, name: str | None) -> Host:
    """Where ``doctor --drain`` runs scontrol: ``name`` (an inventory host), else the host the
    inventory's ``slurm.controller`` names; ProvisionError (exit 2) when neither names one."""
    inv = open_inventory(inventory)
    if name is None:
        settings = Variables(inv).for_host(next(iter(inv.hosts.values()))).get("slurm") if inv.hosts else None
        name = settings.get("controller") if isinstance(settings, dict) else None
        if not isinstance(name, str):
            raise ProvisionError(
                "--drain: say where scontrol runs: --slurm-host HOST (the Slurm controller), or slurm.controller"
            )
    if name not in inv.hosts:
        raise ProvisionError(f"--slurm-host {shown_value(name)}: no such host in the inventory")
    return inv.hosts[name]


def node_check_script(inventory: Path | None, patterns: list[str], facts_dir: Path) -> str:
    """``doctor --node-script``: the node check for the hosts ``patterns`` choose, from their facts
    in ``facts_dir`` (no SSH); ProvisionError naming the hosts without facts."""
    from provision.errors import FactsError
    from provision.plans.node_check import node_script
    from provision.probe.store import load_host

    found, missing = [], []
    for host in open_inventory(inventory).resolve(patterns):
        try:
            found.append(load_host(facts_dir, host.name))
        except FactsError as error:
            missing.append(str(error))
    if missing:
        raise ProvisionError("; ".join(missing[:4]) + (f"; and {len(missing) - 4} more" if len(missing) > 4 else ""))
    if not found:
        raise ProvisionError("--node-script: no hosts: name some or give an inventory with -i")
    return node_script(found)
