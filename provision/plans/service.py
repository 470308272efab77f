"""The service below ``rankfile``, ``launch`` and ``topology``: the hosts to plan on (``--hosts``,
else the inventory's racks in order), their facts (read from the facts folder, or probed now and
saved: :func:`provision.probe.cached.plan_facts`) and the rank plan. Nothing is printed here:
the CLI prints the plan's warnings and each error as one line. Example::

    request = PlanRequest("4x2x1", inventory=Path("inventory/hosts.yml"), facts_dir=Path("inventory/facts"))
    inventory, plan = rank_plan(request)
    print(render_rankfile(plan, now))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from provision.errors import PlanError
from provision.inventory.model import Inventory, check_host_name, open_inventory
from provision.plans.dims import parse_dims
from provision.plans.rankfile import RankPlan, plan_rankfile
from provision.probe.cached import ProbeSettings, plan_facts


@dataclass(frozen=True)
class PlanRequest:
    """What to plan: the shape (``XxYxZ`` as typed), the hosts (``h1,h2,...`` as typed; None: the
    inventory's racks), where the inventory and the facts are, how to probe (None: read the facts
    folder) and the planner's two switches."""

    dims: str
    hosts: str | None = None
    inventory: Path | None = None
    facts_dir: Path = Path("facts")
    probe: ProbeSettings | None = None
    allow_no_gpu: bool = False
    use_gpu_affinity: bool = True


def candidate_hosts(hosts: str | None, inventory: Inventory) -> list[str]:
    """The names in ``hosts`` (``--hosts h1,h2,...``, each checked), else every rack host of the
    inventory, rack 1 first (rank_gen's host order); none either way: :class:`PlanError`."""
    if hosts:
        names = [check_host_name(name, "--hosts") for name in (part.strip() for part in hosts.split(",")) if name]
    else:
        names = inventory.rack_order()
    if not names:
        raise PlanError("no hosts: give --hosts h1,h2,... or racks in the inventory (-i)")
    return names


def rank_plan(request: PlanRequest) -> tuple[Inventory, RankPlan]:
    """The inventory (read once) and the rank plan for ``request``. A bad shape, host name or
    inventory raises before any host is reached; hosts that could not be probed raise
    :class:`provision.probe.cached.ProbeFailed` naming each (the others' facts are saved)."""
    dims = parse_dims(request.dims)
    inventory = open_inventory(request.inventory)
    facts = plan_facts(candidate_hosts(request.hosts, inventory), inventory, request.facts_dir, request.probe)
    plan = plan_rankfile(
        dims, facts, allow_no_gpu=request.allow_no_gpu, use_gpu_affinity=request.use_gpu_affinity, racks=inventory.racks
    )
    return inventory, plan
