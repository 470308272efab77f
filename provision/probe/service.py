"""`provision probe` below the command line: where the results come from (saved captures, SSH,
one Slurm allocation), and their facts saved; the CLI only reads options and prints. Example::

    run = collect(ProbeRequest(Path("inventory/facts"), targets=inventory.resolve(["gpu"])))
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
from provision.probe.run import ProbeResult, probe_hosts, replay
from provision.probe.store import save_hosts

if TYPE_CHECKING:  # SSH is imported only where a host is reached (--replay reaches none)
    from provision.transport.options import SshOptions


@dataclass
class ProbeRequest:
    """What to probe, and how: ``targets`` over SSH (``ssh``, ``forks``, ``workers``), or the captures
    in ``replay_dir`` (``hosts``: which of them), or one Slurm allocation (``slurm``, from ``submit``);
    ``save``: write facts and captures to ``facts_dir``."""

    facts_dir: Path
    hosts: list[str] = field(default_factory=list)
    targets: list[Host] = field(default_factory=list)
    replay_dir: Path | None = None
    slurm: object | None = None  # a provision.probe.slurm.SlurmRequest
    submit: Host | None = None
    ssh: SshOptions | None = None  # None: SshOptions()
    forks: int = defaults.FORKS
    workers: int | None = None
    save: bool = True


@dataclass
class ProbeRun:
    """The results in input order, and one line per host whose facts could not be saved."""

    results: list[ProbeResult]
    unsaved: list[str]

    @property
    def ok(self) -> bool:
        return not self.unsaved and all(result.ok for result in self.results)


def replay_facts_dir(replay_dir: Path) -> Path:
    """Where replayed facts go by default: ``DIR.facts`` beside the capture folder (never over the
    live facts of real hosts with the same names)."""
    folder = replay_dir.resolve()
    return folder.with_name(folder.name + ".facts")


def collect(request: ProbeRequest, on_done: Callable[[ProbeResult], None] | None = None) -> ProbeRun:
    """Probe as ``request`` says (``on_done`` after each SSH host), then save each host's facts.

    A replay folder that does not exist raises :class:`ProvisionError`; a Slurm allocation that
    fails raises :class:`provision.probe.slurm.SlurmProbeError` (with its exit code)."""
    if request.replay_dir is not None:
        try:
            results = replay(request.replay_dir, request.hosts or None)
        except FileNotFoundError as error:
            raise ProvisionError(str(error)) from None
    elif request.slurm is not None:
        from provision.probe.slurm import probe_via_slurm

        results = probe_via_slurm(request.submit, request.slurm, request.ssh or _default_ssh())
    else:
        ssh = request.ssh or _default_ssh()
        results = probe_hosts(request.targets, ssh, request.forks, on_done=on_done, workers=request.workers)
    return ProbeRun(results, save_all(request.facts_dir, results) if request.save else [])


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
