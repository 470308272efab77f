"""The services below ``rankfile``, ``topology`` (and ``launch``'s plan), ``slurm-nodes`` and
``slurm-gres``: the hosts to plan on (``--hosts``, else the inventory's racks in order), their
facts (read from the facts folder, or probed now and saved:
:func:`provision.probe.cached.plan_facts`) and the rank plan; the facts of the hosts named for
the Slurm files. Nothing is printed here: the CLI prints the plan's warnings and each error as
one line. Example::

    request = PlanRequest("4x2x1", inventory=Path("inventory/hosts.yml"), facts_dir=Path("inventory/facts"))
    plan, text = rankfile_text(request, "2026-12-01 15:00:00")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from provision.errors import FactsError, PlanError, ProvisionError
from provision.facts.model import HostFacts
from provision.inventory.model import Inventory, check_host_name, open_inventory
from provision.inventory.targets import resolve_targets
from provision.plans.dims import Dims, parse_dims
from provision.plans.gres import GresPlan, plan_gres
from provision.plans.nics import NicPlan, plan_nics
from provision.plans.rankfile import RankPlan, plan_rankfile, render_rankfile
from provision.plans.slurm import identity_problems, slurm_node_line, uneven_note
from provision.probe.cached import ProbeSettings, plan_facts
from provision.probe.store import cached_hosts, load_host


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
    return inventory, plan_on(dims, candidate_hosts(request.hosts, inventory), inventory, request)


def plan_on(dims: Dims, names: list[str], inventory: Inventory, request: PlanRequest) -> RankPlan:
    """The rank plan of shape ``dims`` on the hosts ``names`` (checked already), with
    ``request``'s facts folder, probing and switches (its shape and hosts are not read again)."""
    facts = plan_facts(names, inventory, request.facts_dir, request.probe)
    return plan_rankfile(
        dims, facts, allow_no_gpu=request.allow_no_gpu, use_gpu_affinity=request.use_gpu_affinity, racks=inventory.racks
    )


def rankfile_text(request: PlanRequest, now: str) -> tuple[RankPlan, str]:
    """``provision rankfile``: the plan (its warnings are the CLI's to print) and the rank file,
    stamped ``now``."""
    _, plan = rank_plan(request)
    return plan, render_rankfile(plan, now)


@dataclass
class Topology:
    """``provision topology``: the plan, its NICs, and notes (no interface common to all hosts:
    the NICs drawn anyway)."""

    plan: RankPlan
    nics: NicPlan
    notes: list[str] = field(default_factory=list)


def topology(request: PlanRequest) -> Topology:
    """The plan and its NICs as ``provision topology`` draws them; a host set with no common
    interface is still drawn (every rail, no interface: said in a note)."""
    _, plan = rank_plan(request)
    try:
        return Topology(plan, plan_nics(plan))
    except PlanError as problem:  # no common interface: the NICs are still worth drawing
        return Topology(plan, plan_nics(plan, iface="", common_rails=True), [str(problem)])


def facts_of(patterns: list[str], inventory: Path | None, facts_dir: Path) -> tuple[list[HostFacts], list[str]]:
    """Facts of the named hosts and groups, and one error line per host without: those named, else
    every host of the inventory, else (no inventory) every host with facts in ``facts_dir``;
    ProvisionError when that is no host at all."""
    inv, targets = resolve_targets(inventory, patterns)
    names = [host.name for host in targets] if (patterns or inv.path is not None) else cached_hosts(facts_dir)
    if not names:
        raise ProvisionError(f"no hosts: name some, give an inventory (-i), or probe hosts into {facts_dir}/ first")
    found, errors = [], []
    for name in names:
        try:
            found.append(load_host(facts_dir, name, inventory))
        except FactsError as problem:
            errors.append(str(problem))
    return found, errors


@dataclass
class SlurmNodes:
    """``provision slurm-nodes``: one NodeName line per host, a note per host whose GPUs are
    uneven, and the problems (a host without usable facts) that stop the whole list."""

    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    hosts: int = 0


def slurm_nodes(patterns: list[str], inventory: Path | None, facts_dir: Path) -> SlurmNodes:
    """slurm.conf's NodeName lines of the named hosts from their facts, all or nothing: with any
    problem (no facts, a reserved word or another host's name) no line is given."""
    found, problems = facts_of(patterns, inventory, facts_dir)
    problems.extend(identity_problems(found).values())
    if problems:
        return SlurmNodes(problems=problems, hosts=len(found) + len(problems))
    notes = [note for note in map(uneven_note, found) if note]
    return SlurmNodes([slurm_node_line(facts) for facts in found], notes, hosts=len(found))


def gres(patterns: list[str], inventory: Path | None, facts_dir: Path, version: str) -> tuple[GresPlan, list[str]]:
    """``provision slurm-gres``: gres.conf's plan from the named hosts' facts, and one error line
    per host without facts (left out of it)."""
    found, errors = facts_of(patterns, inventory, facts_dir)
    return plan_gres(found, version), errors
