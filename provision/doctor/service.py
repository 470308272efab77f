"""`provision doctor` below the command line, in one call (:func:`diagnose`): the hosts and the
checked :class:`DoctorSettings` of one run from what the user typed, the run itself
(:func:`provision.doctor.runner.doctor`), what ``--drain`` marks in Slurm, the ``--json`` document
and the ``--report`` page; or, without a run, ``--node-script``'s script or a saved run's page.
The CLI checks which options go together and prints. Example::

    outcome = diagnose(DoctorRequest(Path("inventory/hosts.yml"), ["gpu"], document=True), connection)
    print(outcome.document["verdict"]["exit_code"])
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from provision import defaults
from provision.doctor.mounts import inventory_exports
from provision.doctor.runner import DoctorSettings
from provision.doctor.sources import anaconda_prefixes, check_dataset
from provision.errors import ProvisionError
from provision.inventory.model import Host, check_user, open_inventory
from provision.inventory.targets import resolve_targets
from provision.playbook.variables import Variables
from provision.text import shown_value

if TYPE_CHECKING:
    from provision.doctor.drain import DrainReport
    from provision.doctor.perf import PerfSettings
    from provision.doctor.runner import DoctorRun


@dataclass(frozen=True)
class DoctorRequest:
    """What the user asked of doctor: the ``hosts`` typed (names, groups, patterns of the
    ``inventory``; none: all), the job ``user``, ``datasets`` (``deep``: hash a sample), the
    pairwise fan-out, ``--perf`` and its ``rounds``/``budget``/``perf_port``, ``--drain`` (on
    ``slurm_host``); whether the ``document`` (--json) and the report ``page`` are wanted
    (``page_file``: where it goes, checked before the run; ``strict``: warnings fail); or, without
    a run, ``node_script`` (from the facts in ``facts_dir``) or the page of ``from_json``."""

    inventory: Path | None = None
    hosts: list[str] = field(default_factory=list)
    user: str | None = None
    datasets: list[str] = field(default_factory=list)
    deep: bool = False
    pairwise_fanout: int | None = None
    perf: bool = False
    rounds: int | None = None
    budget: str | None = None
    perf_port: int = defaults.PERF_PORT
    drain: bool = False
    slurm_host: str | None = None
    document: bool = False
    page: bool = False
    page_file: Path | None = None
    strict: bool = False
    node_script: bool = False
    facts_dir: Path = defaults.FACTS_DIR
    from_json: Path | None = None


@dataclass
class DoctorOutcome:
    """What one doctor call gives: the ``run`` (its hosts ``targets``), what ``--drain`` did
    (``drained``), the ``--json`` ``document`` and the report ``page`` when asked; or only the
    node check ``script`` (``--node-script``) or the ``page`` of a saved run (``--from-json``)."""

    run: DoctorRun | None = None
    targets: list[Host] = field(default_factory=list)
    drained: DrainReport | None = None
    document: dict | None = None
    page: str | None = None
    script: str | None = None


def diagnose(request: DoctorRequest, connection) -> DoctorOutcome:
    """One ``provision doctor`` as ``request`` says, over ``connection`` (its ``ssh`` and
    ``forks``). Bad input (an option's value, a host name, a report path that cannot be written)
    raises :class:`ProvisionError` before any host is reached."""
    if request.from_json is not None:
        return DoctorOutcome(page=saved_page(request.from_json))
    if request.node_script:
        return DoctorOutcome(script=node_check_script(request.inventory, request.hosts, request.facts_dir))
    from provision.doctor.perf import perf_settings
    from provision.doctor.runner import doctor

    drain_on = slurm_host(request.inventory, request.slurm_host) if request.drain else None
    targets, settings = doctor_request(
        request.inventory,
        request.hosts,
        connection,
        user=request.user,
        datasets=request.datasets,
        deep=request.deep,
        pairwise_fanout=request.pairwise_fanout,
        perf=perf_settings(request.perf, request.rounds, request.budget, request.perf_port),
    )
    if request.page_file is not None:
        report_target(request.page_file)
    if not targets:
        raise ProvisionError("no hosts: name some or give an inventory with -i")
    outcome = DoctorOutcome(doctor(targets, settings), targets)
    if drain_on is not None:
        from provision.doctor.drain import apply_marks, drain_plan

        outcome.drained = apply_marks(drain_plan(outcome.run), drain_on, settings.ssh)
    if request.document or request.page:
        outcome.document = run_document(outcome.run, targets, request.inventory, strict=request.strict, drain=outcome.drained)
    if request.page:
        from provision.doctor.page import report_page

        outcome.page = report_page(outcome.document)
    return outcome


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
    inv, targets = resolve_targets(inventory, patterns)
    variables = Variables(inv)  # read once: the Anaconda prefixes and the NFS exports both come from it
    settings = DoctorSettings(
        ssh=connection.ssh,
        user=check_user(user, "--user") if user else "",
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
    for host in resolve_targets(inventory, patterns)[1]:
        try:
            found.append(load_host(facts_dir, host.name))
        except FactsError as error:
            missing.append(str(error))
    if missing:
        raise ProvisionError("; ".join(missing[:4]) + (f"; and {len(missing) - 4} more" if len(missing) > 4 else ""))
    if not found:
        raise ProvisionError("--node-script: no hosts: name some or give an inventory with -i")
    return node_script(found)


def run_document(
    run: DoctorRun, targets: list[Host], inventory: Path | None, *, strict: bool = False, drain: DrainReport | None = None
) -> dict:
    """``doctor --json``'s document of a run, and the report page's input: the checks and the
    bandwidth tests, with when it ran (UTC), the inventory file, its racks (the run's hosts in
    them) and each distinct layout of the nodes that answered."""
    from provision.doctor.layouts import node_layouts
    from provision.doctor.report import document

    inv = open_inventory(inventory)
    names = [host.name for host in targets]
    chosen = set(names)
    racks = [
        {"name": rack.name, "hosts": [host for host in rack.hosts if host in chosen]}
        for rack in inv.racks
        if any(host in chosen for host in rack.hosts)
    ]
    facts = [report.facts for report in run.reports if report.ok and report.facts is not None]
    return document(
        run.results,
        names,
        strict=strict,
        perf=run.perf,
        drain=drain,
        generated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        inventory=str(inv.path) if inv.path is not None else None,
        racks=racks,
        layouts=node_layouts(facts),
    )


def report_target(path: Path) -> None:
    """Refuse, before a run, a ``--report`` path the page could not be written to: a link, a
    folder or another special file there, or no folder to hold it (ProvisionError: exit 2).
    The write itself never follows a link either (:func:`provision.files.write_atomic`)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise ProvisionError(f"--report {path}: no folder {path.parent} to write it in") from None
        return
    if not stat.S_ISREG(mode):
        raise ProvisionError(f"--report {path}: a link, a folder or a special file is there: refused (choose another path)")


def saved_page(path: Path) -> str:
    """``doctor --report FILE --from-json SAVED``: the page of a saved ``doctor --json`` document
    (read as a regular file, never through a link); ProvisionError naming the file when it is not one."""
    from provision.doctor.page import report_page
    from provision.files import read_regular

    try:
        data = json.loads(read_regular(path))
    except FileNotFoundError:
        raise ProvisionError(f"--from-json {path}: no such file") from None
    except OSError as error:
        raise ProvisionError(f"--from-json {path}: {error.strerror or error}") from None
    except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, nested beyond reason
        raise ProvisionError(f"--from-json {path}: not JSON ({str(error)[:120]})") from None
    try:
        return report_page(data)
    except ProvisionError as error:
        raise ProvisionError(f"--from-json {path}: {error}") from None
