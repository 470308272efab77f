"""`provision doctor` below the command line: the hosts and the checked :class:`DoctorSettings` of
one run, from what the user typed (the run itself is :func:`provision.doctor.runner.doctor`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from provision.doctor.mounts import inventory_exports
from provision.doctor.runner import DoctorSettings
from provision.doctor.sources import anaconda_prefixes, check_dataset, check_user
from provision.inventory.model import Host, open_inventory
from provision.playbook.variables import Variables

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
        user=check_user(user) if user else "",
        datasets=tuple(check_dataset(path) for path in datasets or []),
        deep=deep,
        forks=connection.forks,
        conda_prefixes=anaconda_prefixes(variables, targets),
        exports=inventory_exports(variables, targets),
        perf=perf,
        **({"pairwise_fanout": pairwise_fanout} if pairwise_fanout else {}),
    )
    return targets, settings
