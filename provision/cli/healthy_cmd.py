"""`launch --pick-healthy`: the hosts to plan on, from doctor's verdict (printing who was left out)."""

from __future__ import annotations

from provision.cli.output import fail, stderr
from provision.doctor.healthy import pick_healthy
from provision.doctor.perf import perf_settings
from provision.errors import PlanError, ProvisionError
from provision.inventory.model import open_inventory
from provision.plans.dims import parse_dims
from provision.plans.service import candidate_hosts


def healthy_hosts(dims_text: str, hosts: str | None, settings, perf: bool, budget: str | None) -> str:
    """``--hosts`` for the plan: Y·Z of the candidates (``--hosts``, else the inventory's racks) that
    pass doctor's fast checks (and ``--perf``); each candidate left out is one stderr line with why.
    Too few healthy hosts: one line, exit 1."""
    try:
        dims = parse_dims(dims_text)
        inv = open_inventory(settings.inventory)
        candidates = inv.resolve(candidate_hosts(hosts, inv))
        perf_options = perf_settings(perf, None, budget)
    except ProvisionError as error:
        raise fail(str(error)) from None
    try:
        selection = pick_healthy(dims, candidates, inv.racks, settings.ssh, perf_options, settings.forks)
    except PlanError as error:
        raise fail(f"not launched: {error}", code=1) from None
    for host, why in selection.left_out:
        stderr().print(f"provision: left out {host}: {why}", highlight=False, soft_wrap=True, markup=False)
    for note in selection.notes:
        stderr().print(f"provision: warning: {note}", highlight=False, soft_wrap=True, markup=False)
    return ",".join(selection.hosts)
