"""Run doctor: per host one SSH connection with two round trips (the gather script, then the
pairwise step as the job user), all hosts in parallel; then the checks on this machine.

A host that cannot be reached or read becomes a :class:`NodeReport` with an error (check 1
fails on it); every other host goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from provision.doctor import checks, pairwise, sources
from provision.doctor.model import CheckResult, NodeReport
from provision.errors import ParseError
from provision.facts import nvidia
from provision.inventory.model import Host
from provision.probe.gather import STEPS, Capture, gather_script, new_nonce, split_output
from provision.probe.run import DEFAULT_FORKS, facts_from_captures
from provision.transport.connection import (
    HostFailure,
    SshOptions,
    describe_failure,
    open_connection,
    run_command,
    run_on_connection,
)
from provision.transport.parallel import fan_out

FAST_SKIPPED = (sources.GPU_HEALTH, sources.XID, sources.DATASET)  # not needed by the fast checks


@dataclass(frozen=True)
class DoctorSettings:
    """What to check and how to connect."""

    ssh: SshOptions = field(default_factory=SshOptions)
    user: str = ""  # the job user; "" = each host's login user
    datasets: tuple[str, ...] = ()
    deep: bool = False
    fast: bool = False  # only the checks launch runs first (1, 2, 3, 6)
    forks: int = DEFAULT_FORKS


def doctor_steps(fast: bool) -> tuple:
    """The gather steps: the clock, probe's steps, doctor's own, the clock again."""
    extra = tuple(s for s in sources.STEPS if not (fast and s in FAST_SKIPPED))
    return (sources.CLOCK_START, *STEPS, *extra, sources.CLOCK_END)


class _Session:
    """One host's connection (or the local shell for ``localhost``), reused for both round trips."""

    def __init__(self, host: Host, options: SshOptions) -> None:
        self.host, self.options, self.connection = host, options, None
        if not host.is_local:
            self.connection = open_connection(host, options)
            self.connection.open()

    def run(self, command: str, stdin: str):
        if self.connection is None:
            return run_command(self.host, command, self.options, stdin=stdin)
        return run_on_connection(self.connection, command, stdin.encode(), self.options)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


def _read_gather(host: str, captures: dict[str, Capture], settings: DoctorSettings, times: tuple[float, float]) -> NodeReport:
    """Everything the gather round trip tells (pure apart from nothing: captures in, report out)."""
    probed = facts_from_captures(host, {n: c for n, c in captures.items() if n in {s.name for s in STEPS}})
    if probed.facts is None:
        return NodeReport(host, error=f"{probed.error_kind}: {probed.error}")

    def text(step) -> str:
        capture = captures.get(step.name)
        return capture.stdout if capture is not None and capture.available else ""

    login, ids, _ = sources.parse_user(text(sources.USER))
    limits, shm = sources.parse_limits(text(sources.LIMITS)) if text(sources.LIMITS) else (None, None)
    gpu_capture = captures.get(sources.GPU_HEALTH.name)
    health = sources.parse_gpu_health(gpu_capture.stdout) if gpu_capture is not None and gpu_capture.available else None
    pci = len(nvidia.parse_sysfs_gpu(text(nvidia.SOURCE_SYSFS)))
    offset = error = None
    if text(sources.CLOCK_START) and text(sources.CLOCK_END):
        offset, error = sources.clock_offset(
            times[0],
            sources.parse_clock(text(sources.CLOCK_START), sources.CLOCK_START.name),
            sources.parse_clock(text(sources.CLOCK_END), sources.CLOCK_END.name),
            times[1],
        )
    login_uid = None
    for line in text(sources.USER).splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] == "login" and sources.digits(fields[2]):
            login_uid = int(fields[2])
    return NodeReport(
        host,
        facts=probed.facts,
        login_user=login,
        login_uid=login_uid,
        job_user=settings.user,
        job_ids=ids,
        own_limits=limits,
        shm_kib=shm,
        software=sources.parse_software(text(sources.SOFTWARE)),
        datasets=sources.parse_datasets(text(sources.DATASET), settings.datasets),
        mtus=sources.parse_mtu(text(sources.MTU)),
        ib_ports=sources.parse_rdma(text(sources.RDMA)),
        gpu_health=health,
        pci_gpus=pci,
        xids=sources.parse_xid(text(sources.XID)),
        clock_offset=offset,
        clock_error=error,
    )


def gather_command(settings: DoctorSettings) -> str:
    """``sh -s -- USER [DATASET...]`` (checked values, quoted), with DOCTOR_DEEP for --deep."""
    import shlex

    args = " ".join(shlex.quote(a) for a in (settings.user, *settings.datasets))
    return ("DOCTOR_DEEP=1 " if settings.deep else "") + f"sh -s -- {args}"


def doctor_host(host: Host, names: list[str], settings: DoctorSettings) -> NodeReport:
    """Both round trips on one host; every failure becomes this host's error."""
    session = None
    steps = doctor_steps(settings.fast)
    try:
        session = _Session(host, settings.ssh)
        nonce = new_nonce()
        sent = time.time()
        result = session.run(gather_command(settings), gather_script(nonce, steps))
        received = time.time()
        captures = split_output(result.stdout, nonce, result.stderr, names=tuple(s.name for s in steps))
        report = _read_gather(host.name, captures, settings, (sent, received))
        if not report.ok or report.job_ids is None:
            return report
        peers = [n for n in names if n != host.name]
        nonce = new_nonce()
        command = pairwise.pairwise_command(host.name, peers, report.login_user, report.login_uid, settings.user)
        done = session.run(command, pairwise.pairwise_script(nonce))
        pairs, limits, resolved = pairwise.parse_pairwise(done.stdout, nonce, set(names))
        if not pairs and peers and done.exit_code:
            why = (done.stderr.strip().splitlines() or [f"exit {done.exit_code}"])[0][:120]
            pairs = {peer: f"could not run ssh as {settings.user or report.login_user}: {why}" for peer in peers}
        return replace(report, pairwise=pairs, peer_limits=limits, resolved=resolved)
    except HostFailure as failure:
        return NodeReport(host.name, error=f"{failure.kind}: {failure}")
    except ParseError as error:
        return NodeReport(host.name, error=f"parse: {error}")
    except Exception as error:  # noqa: BLE001 - one host's trouble never stops the others
        failure = describe_failure(error, settings.ssh)
        return NodeReport(host.name, error=f"{failure.kind}: {failure}")
    finally:
        if session is not None:
            session.close()


def gather_reports(
    hosts: list[Host], settings: DoctorSettings, on_done: Callable[[NodeReport], None] | None = None
) -> list[NodeReport]:
    """:func:`doctor_host` on every host, at most ``settings.forks`` at once, in input order."""
    names = [h.name for h in hosts]
    return fan_out(
        hosts,
        lambda host: doctor_host(host, names, settings),
        settings.forks,
        on_done=(lambda _h, r: on_done(r)) if on_done else None,
        on_error=lambda host, error: NodeReport(host.name, error=f"defect: {type(error).__name__}: {error}"[:300]),
    )


def run_checks(reports: list[NodeReport], settings: DoctorSettings) -> list[CheckResult]:
    """Every check (the fast ones only with ``settings.fast``), in the order of the issue."""
    user = settings.user or "the login user"
    if not any(r.ok for r in reports):  # nothing to compare: the one failed check says why
        return [checks.check_reach(reports, user)]
    results = [
        checks.check_reach(reports, user),
        pairwise.check_pairwise(reports, user),
        checks.check_software(reports),
    ]
    if not settings.fast:
        results += [checks.check_hardware(reports), *checks.check_datasets(reports, settings.datasets)]
    results.append(checks.check_limits(reports))
    if not settings.fast:
        results += [
            checks.check_names(reports),
            checks.check_network(reports),
            checks.check_rdma(reports),
            checks.check_time(reports),
            checks.check_gpu_health(reports),
        ]
    return results


def doctor(hosts: list[Host], settings: DoctorSettings) -> list[CheckResult]:
    """Gather from every host, then check: the whole of `provision doctor` below the CLI."""
    return run_checks(gather_reports(hosts, settings), settings)


def fast_checks(hosts: list[Host], ssh: SshOptions, forks: int = DEFAULT_FORKS) -> list[CheckResult]:
    """The checks `provision launch --run` makes first (1, 2, 3, 6), as the login user."""
    settings = DoctorSettings(ssh=ssh, fast=True, forks=forks)
    return run_checks(gather_reports(hosts, settings), settings)
