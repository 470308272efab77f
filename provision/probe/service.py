"""`provision probe` below the command line: the hosts typed resolved against the inventory, where
the results come from (saved captures, SSH, one Slurm allocation), and their facts saved; the CLI
only reads options and prints. Example::

    run = collect(ProbeRequest(Path("inventory/facts"), ["gpu"], inventory=Path("inventory/hosts.yml")))
    failed = [result.host for result in run.results if not result.ok]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from provision import defaults
from provision.errors import ProvisionError
from provision.inventory.model import Host
from provision.inventory.targets import resolve_targets
from provision.probe.run import ProbeResult, probe_hosts, replay
from provision.probe.store import save_hosts

if TYPE_CHECKING:  # SSH and Slurm are imported only where a host is reached (--replay reaches none)
    from provision.probe.slurm import SlurmRequest
    from provision.transport.options import SshOptions


@dataclass
class ProbeRequest:
    """What to probe, and how: the ``hosts`` typed (names, groups, patterns of the ``inventory``;
    none: all of it) over SSH (``ssh``, ``forks``, ``workers``); or the captures in ``replay_dir``
    (``hosts``: which of them); or one Slurm allocation (``slurm``) from the submit host ``via_host``.
    ``save``: write facts and captures to ``facts_dir`` (None with ``replay_dir``: ``DIR.facts``
    beside it, never over the live facts of real hosts with the same names)."""

    facts_dir: Path | None
    hosts: list[str] = field(default_factory=list)
    inventory: Path | None = None
    replay_dir: Path | None = None
    slurm: SlurmRequest | None = None
    via_host: str = "localhost"
    ssh: SshOptions | None = None  # None: SshOptions()
    forks: int = defaults.FORKS
    workers: int | None = None
    save: bool = True


@dataclass
class ProbeRun:
    """The results in input order, one line per host whose facts could not be saved, and the
    folder they were saved in."""

    results: list[ProbeResult]
    unsaved: list[str]
    facts_dir: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.unsaved and all(result.ok for result in self.results)


def replay_facts_dir(replay_dir: Path) -> Path:
    """Where replayed facts go by default: ``DIR.facts`` beside the capture folder (never over the
    live facts of real hosts with the same names)."""
    folder = replay_dir.resolve()
    return folder.with_name(folder.name + ".facts")


def collect(
    request: ProbeRequest,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[ProbeResult], None] | None = None,
) -> ProbeRun:
    """Probe as ``request`` says, then save each host's facts: ``on_start`` with the number of SSH
    hosts before the first is reached, ``on_done`` after each one.

    Bad input raises :class:`ProvisionError` before any host is reached (a typo of an inventory
    name, no hosts, more than one submit host, a replay folder that does not exist); a Slurm
    allocation that fails raises :class:`provision.probe.slurm.SlurmProbeError` (with its exit code)."""
    facts_dir = request.facts_dir
    if request.replay_dir is not None:
        facts_dir = facts_dir or replay_facts_dir(request.replay_dir)
        try:
            results = replay(request.replay_dir, request.hosts or None)
        except FileNotFoundError as error:
            raise ProvisionError(str(error)) from None
    elif request.slurm is not None:
        from provision.probe.slurm import probe_via_slurm

        results = probe_via_slurm(_submit_host(request), request.slurm, request.ssh or _default_ssh())
    else:
        _, targets = resolve_targets(request.inventory, request.hosts)
        if not targets:
            raise ProvisionError("no hosts: name some (provision probe localhost) or give an inventory with -i")
        if on_start is not None:
            on_start(len(targets))
        ssh = request.ssh or _default_ssh()
        results = probe_hosts(targets, ssh, request.forks, on_done=on_done, workers=request.workers)
    return ProbeRun(results, save_all(facts_dir, results) if request.save else [], facts_dir)


def _submit_host(request: ProbeRequest) -> Host:
    """The one inventory host (or ad-hoc name) ``--via-host`` names."""
    _, submits = resolve_targets(request.inventory, [request.via_host])
    if len(submits) != 1:
        raise ProvisionError(f"--via-host {request.via_host}: name one submit host, not {len(submits)}")
    return submits[0]


def _default_ssh():
    from provision.transport.options import SshOptions

    return SshOptions()


def save_all(facts_dir: Path, results: list[ProbeResult]) -> list[str]:
    """Save every probed host's facts in one batch (one sync for the run, :func:`save_hosts`); one
    line per host that could not be saved (facts folder not writable or not safe, disk full)."""
    probed = [(result.facts, result.captures) for result in results if result.facts is not None]
    try:
        problems = save_hosts(facts_dir, probed)
    except (OSError, ProvisionError) as error:
        why = f"{error.filename}: {error.strerror}" if isinstance(error, OSError) and error.filename else str(error)
        problems = {facts.host: why for facts, _ in probed}
    return [f"{host}: cannot save facts: {why}" for host, why in problems.items()]
