"""`provision launch` below the command line, in one call (:func:`launch`), in this order: the shape
parsed and the inventory read once; with ``--pick-healthy`` the candidates checked by doctor and
the shape filled from those that passed; the rank plan on those hosts; the NIC plan and the
export lint; the job's files written; then the command printed, or, with ``--run``, doctor's fast
checks and mpirun started from the first host.

What the user must see while it goes (warnings, notes, the files written, the hosts left out) is
said through :class:`LaunchHooks` as it happens, so it is printed before mpirun's own output.
This module sits in the layer of doctor (it uses doctor's checks), above the pure
:mod:`provision.launch.job`. Example::

    done = launch(LaunchRequest(PlanRequest("4x2x1"), LaunchOptions(["python", "train.py"])), connection, LaunchHooks())
    print(done.command, end="")
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from provision.errors import PlanError, ProvisionError
from provision.files import write_atomic
from provision.inventory.model import Host, Inventory, open_inventory
from provision.launch.export_lint import export_warnings
from provision.launch.job import LaunchOptions, launch_output
from provision.plans.dims import Dims, parse_dims
from provision.plans.nics import plan_nics
from provision.plans.service import PlanRequest, candidate_hosts, plan_on


class NotLaunched(ProvisionError):
    """Too few hosts passed doctor's checks to fill the shape: nothing was started (exit 1)."""

    code = 1


@dataclass(frozen=True)
class LaunchRequest:
    """What the user asked of ``launch``: the ``plan`` (shape, hosts, inventory, facts, probing),
    the job's ``options``, the rails in common only, the form (``fmt``; None: mpirun), ``run`` it
    from the first host (after doctor's fast checks unless ``skip_doctor``), pick the hosts that
    pass doctor's checks (``pick_healthy``, ``perf`` and its ``budget``; the plan's hosts are then
    the candidates), and when the files are stamped (``now``; None: this minute)."""

    plan: PlanRequest
    options: LaunchOptions
    common_rails: bool = False
    fmt: str | None = None
    run: bool = False
    skip_doctor: bool = False
    pick_healthy: bool = False
    perf: bool = False
    budget: str | None = None
    now: str | None = None


@dataclass(frozen=True)
class LaunchHooks:
    """How a launch talks to the person at the terminal as it goes: ``warn`` (a problem the launch
    goes on with), ``note`` (worth knowing), ``say`` (what the launch did: a host left out, where
    the job's files go), ``wrote`` (a file written: what, where, and where the file it replaced
    was kept)."""

    warn: Callable[[str], None] = lambda _text: None
    note: Callable[[str], None] = lambda _text: None
    say: Callable[[str], None] = lambda _text: None
    wrote: Callable[[str, Path, Path | None], None] = lambda _what, _path, _kept: None


@dataclass
class LaunchOutcome:
    """What the launch gives: the ``command`` to print (the plain mpirun line, another form's,
    or the batch script; None once --run started it), doctor's ``checks`` that stopped a --run
    (printed as doctor prints them), and the exit code (mpirun's, under --run)."""

    command: str | None = None
    checks: list = field(default_factory=list)
    exit_code: int = 0


def launch(request: LaunchRequest, connection, hooks: LaunchHooks = LaunchHooks()) -> LaunchOutcome:
    """One ``provision launch`` as ``request`` says, over ``connection`` (its ``ssh`` and
    ``forks``). Bad input raises :class:`ProvisionError` (a
    :class:`PlanError` for options the plan refuses) before anything is written or started; hosts
    that could not be probed raise :class:`provision.probe.cached.ProbeFailed`; too few healthy
    hosts :class:`NotLaunched`."""
    dims = parse_dims(request.plan.dims)
    inventory = open_inventory(request.plan.inventory)  # read once, also for --pick-healthy
    names = candidate_hosts(request.plan.hosts, inventory)
    if request.pick_healthy or request.perf:
        names = _healthy(dims, inventory, names, connection, request, hooks)
    plan = plan_on(dims, names, inventory, request.plan)
    for warning in plan.warnings:
        hooks.warn(str(warning))
    options = request.options
    nics = plan_nics(plan, options.iface, common_rails=request.common_rails)  # no common interface, rails differ: PlanError
    for line in nics.notes:
        hooks.note(line)
    for line in export_warnings(plan, nics, options.export, own_gpu_only=options.own_gpu_only):
        hooks.warn(line)
    now = request.now or dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    output, job = launch_output(plan, nics, options, request.fmt, now)  # refuses bad options before anything is written
    for file in output.files:
        hooks.wrote(file.what, Path(file.path), write_atomic(Path(file.path), file.text))
    for line in output.notes:
        hooks.say(line)
    if job is None:  # --format: the command (or batch script) to run where the user chooses
        return LaunchOutcome(output.command)
    from provision.launch.runner import login_user, run_from_first_host

    first = inventory.resolve([plan.hosts[0].host])[0]
    if not request.run:
        from provision.launch.mpirun import root_message

        if login_user(first, connection.ssh) == "root" and not options.allow_run_as_root:
            hooks.warn(root_message(first.name, "root"))
        return LaunchOutcome(output.command)
    if not request.skip_doctor:
        checks = _doctor_gate(inventory.resolve([host.host for host in plan.hosts]), connection, hooks)
        if checks:
            return LaunchOutcome(checks=checks, exit_code=1)
    code = run_from_first_host(
        first,
        connection.ssh,
        plan,
        job.remote,
        job.argv,
        allow_run_as_root=options.allow_run_as_root,
        check=options.report_bindings,
        inventory_path=str(request.plan.inventory) if request.plan.inventory else None,
    )
    return LaunchOutcome(exit_code=code)


def _healthy(dims: Dims, inventory: Inventory, names: list[str], connection, request: LaunchRequest, hooks) -> list[str]:
    """``--pick-healthy``: Y·Z of the candidates ``names`` that pass doctor's fast checks (and
    ``--perf``), rack by rack; each candidate left out is said with why (:class:`NotLaunched`
    when too few are healthy)."""
    from provision.doctor.healthy import pick_healthy
    from provision.doctor.perf import perf_settings

    perf = perf_settings(request.perf, None, request.budget)
    try:
        selection = pick_healthy(dims, inventory.resolve(names), inventory.racks, connection.ssh, perf, connection.forks)
    except PlanError as error:
        raise NotLaunched(f"not launched: {error}") from None
    for host, why in selection.left_out:
        hooks.say(f"left out {host}: {why}")
    for line in selection.notes:
        hooks.warn(line)
    return list(selection.hosts)


def _doctor_gate(hosts: list[Host], connection, hooks: LaunchHooks) -> list:
    """doctor's fast checks before a --run: the checks when one failed (the launch stops), else
    none; nodes that cannot all SSH to each other are a warning (mpirun then starts every daemon
    itself)."""
    from provision.doctor.runner import fast_checks

    results = fast_checks(hosts, connection.ssh, connection.forks)
    if any(result.status == "fail" for result in results):
        return results
    for result in results:
        if result.name == "pairwise ssh" and result.status == "warn":  # the nodes cannot all reach each other
            hooks.warn(f"{result.name}: {result.detail}")
    return []
