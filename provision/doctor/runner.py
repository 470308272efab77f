"""Run doctor: per host one SSH connection with two round trips, in two phases over all hosts
at once: the gather script on every host, then the pairwise step as the job user on every host
(the connection stays open between them); then the checks on this machine. Each phase's wall
time is kept (:class:`DoctorRun`), so a benchmark can tell them apart.

A host that cannot be reached or read becomes a :class:`NodeReport` with an error (check 1
fails on it); every other host goes on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from provision.doctor import alike, fabric, health, limits, mounts, network, pairwise, sources
from provision.doctor.model import FAIL, WARN, CheckResult, NodeReport
from provision.errors import ParseError
from provision.facts import nvidia
from provision.inventory.model import Host
from provision.probe.gather import STEPS, Capture, gather_script, new_nonce, split_output
from provision.probe.run import DEFAULT_FORKS, facts_from_captures
from provision.transport.options import HostFailure, SshOptions

if TYPE_CHECKING:
    from provision.doctor.perf import PerfRun, PerfSettings
    from provision.transport.session import Session
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
    pairwise_fanout: int = pairwise.PARALLEL  # ssh clients at once on each node
    conda_prefixes: tuple[str, ...] = ()  # the inventory's Anaconda prefixes (checked), looked at first
    exports: tuple[mounts.Export, ...] = ()  # the inventory's NFS exports: clients must mount them from the server
    perf: PerfSettings | None = None  # --perf: pairwise bandwidth tests in rounds (:mod:`.perf`)


def doctor_steps(fast: bool) -> tuple:
    """The gather steps: the clock, probe's steps, doctor's own, the clock again."""
    extra = tuple(s for s in sources.STEPS if not (fast and s in FAST_SKIPPED))
    return (sources.CLOCK_START, *STEPS, *extra, sources.CLOCK_END)


def open_session(host: Host, options: SshOptions) -> Session:
    """The host's :class:`~provision.transport.session.Session`, connected now (raises
    :class:`HostFailure`), reused for every round trip doctor makes there. SSH (Fabric, paramiko)
    is imported when doctor first connects, not at its start."""
    from provision.transport.session import Session

    session = Session(host, options)
    session.open()
    return session


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
        gpu_health=health,
        pci_gpus=pci,
        xids=sources.parse_xid(text(sources.XID)),
        clock_offset=offset,
        clock_error=error,
    )


def gather_command(settings: DoctorSettings) -> str:
    """``sh -s -- USER [DATASET...]`` (checked values, quoted), with DOCTOR_DEEP for --deep and
    DOCTOR_CONDA for the inventory's Anaconda prefixes (each one shell word: checked)."""
    import shlex

    args = " ".join(shlex.quote(a) for a in (settings.user, *settings.datasets))
    conda = f"DOCTOR_CONDA={shlex.quote(' '.join(settings.conda_prefixes))} " if settings.conda_prefixes else ""
    return conda + ("DOCTOR_DEEP=1 " if settings.deep else "") + f"sh -s -- {args}"


def _gather_host(host: Host, settings: DoctorSettings, sessions: dict[str, Session]) -> NodeReport:
    """The gather round trip on one host; its open session is left in ``sessions`` for the
    pairwise phase when the host answered. Every failure becomes this host's error."""
    session = None
    steps = doctor_steps(settings.fast)
    try:
        session = open_session(host, settings.ssh)  # the handshake before the clock: its window is the round trip
        nonce = new_nonce()
        sent = time.time()
        result = session.run(gather_command(settings), gather_script(nonce, steps))
        received = time.time()
        captures = split_output(result.stdout, nonce, result.stderr, names=tuple(s.name for s in steps))
        report = _read_gather(host.name, captures, settings, (sent, received))
        if report.ok and report.job_ids is not None:
            sessions[host.name], session = session, None  # kept open for the pairwise round trip
        return report
    except Exception as error:  # noqa: BLE001 - one host's trouble never stops the others
        return NodeReport(host.name, error=_why(error, settings))
    finally:
        if session is not None:
            session.close()


def _pairwise_host(report: NodeReport, session: Session, names: list[str], settings: DoctorSettings) -> NodeReport:
    """The pairwise round trip on the session the gather left open; closes it. When it fails
    (lost connection, timeout), every pair from this node fails with the reason; what the
    gather found still counts in the other checks."""
    peers = pairwise.peer_order(report.host, names)
    try:
        nonce = new_nonce()
        command = pairwise.pairwise_command(report.host, peers, report.login_user, report.login_uid, settings.user)
        script = pairwise.pairwise_script(nonce, settings.pairwise_fanout, settings.ssh.connect_timeout)
        done = session.run(command, script)
        pairs, limits, resolved = pairwise.parse_pairwise(done.stdout, nonce, set(names))
        if not pairs and peers and done.exit_code:
            why = (done.stderr.strip().splitlines() or [f"exit {done.exit_code}"])[0][:120]
            pairs = {peer: f"could not run ssh as {settings.user or report.login_user}: {why}" for peer in peers}
        return replace(report, pairwise=pairs, peer_limits=limits, resolved=resolved)
    except Exception as error:  # noqa: BLE001 - one host's trouble never stops the others
        return replace(report, pairwise=dict.fromkeys(peers, f"the pairwise step failed: {_why(error, settings)}"[:120]))
    finally:
        session.close()


def _why(error: BaseException, settings: DoctorSettings) -> str:
    """One line for a host's failure, whatever was raised."""
    if isinstance(error, HostFailure):
        return f"{error.kind}: {error}"
    if isinstance(error, ParseError):
        return f"parse: {error}"
    from provision.transport.connection import describe_failure

    failure = describe_failure(error, settings.ssh)
    return f"{failure.kind}: {failure}"


def _defect(host: str, error: BaseException) -> NodeReport:
    return NodeReport(host, error=f"defect: {type(error).__name__}: {error}"[:300])


@dataclass(frozen=True)
class DoctorRun:
    """What one doctor run found: the checks, the nodes' reports, and each phase's wall time."""

    results: list[CheckResult]
    reports: list[NodeReport]
    seconds: dict[str, float]  # gather, pairwise, checks (and perf): wall time of each phase
    perf: PerfRun | None = None

    def timings(self) -> dict:
        """Phase wall times and the work each phase did (``--timings``): nodes gathered, ordered
        pairs the nodes reported on and how many of them connected."""
        reached = [r for r in self.reports if r.ok and r.job_ids is not None]
        reported = sum(len(r.pairwise) for r in reached)
        connected = sum(1 for r in reached for why in r.pairwise.values() if not why)
        perf = {}
        if self.perf is not None:
            coverage = self.perf.coverage
            perf = {
                "perf": {
                    "pairs_total": coverage.pairs_total,
                    "pairs_tested": coverage.pairs_tested,
                    "pairs_measured": sum(1 for link in self.perf.links if link.gbps is not None),
                    "rounds_run": coverage.rounds_run,
                    "rounds_planned": coverage.rounds_planned,
                    "nodes_left_out": len(self.perf.left_out),
                }
            }
        return perf | {
            "seconds": {phase: round(value, 3) for phase, value in self.seconds.items()},
            "nodes": len(self.reports),
            "nodes_gathered": sum(1 for r in self.reports if r.facts is not None),
            "pairs_expected": len(reached) * (len(reached) - 1),
            "pairs_reported": reported,
            "pairs_connected": connected,
            "checks": len(self.results),
        }


def gather_reports(hosts: list[Host], settings: DoctorSettings, seconds: dict[str, float] | None = None) -> list[NodeReport]:
    """Two phases, each on every host at once (at most ``settings.forks``), reports in input order:
    the gather round trip, then, once every host has answered, the pairwise round trip on the
    same connection, so every node runs its pairwise step at the same time and each phase has
    its own wall time (written to ``seconds``). Threads in this process: the connections stay
    open between the phases."""
    names = [h.name for h in hosts]
    sessions: dict[str, Session] = {}  # host -> open session, filled by the gather threads
    started = time.monotonic()
    try:
        gathered = fan_out(
            hosts,
            lambda host: _gather_host(host, settings, sessions),
            settings.forks,
            on_error=lambda host, error: _defect(host.name, error),
            workers=1,
        )
        middle = time.monotonic()
        pending = [r for r in gathered if r.host in sessions]
        paired = fan_out(
            pending,
            lambda report: _pairwise_host(report, sessions.pop(report.host), names, settings),
            settings.forks,
            on_error=lambda report, error: replace(report, error=f"defect: {type(error).__name__}: {error}"[:300]),
            workers=1,
        )
    finally:
        for session in list(sessions.values()):  # a host whose pairwise step never ran
            session.close()
    if seconds is not None:
        seconds["gather"], seconds["pairwise"] = middle - started, time.monotonic() - middle
    done = {r.host: r for r in paired}
    return [done.get(r.host, r) for r in gathered]


def run_checks(reports: list[NodeReport], settings: DoctorSettings) -> list[CheckResult]:
    """Every check (the fast ones only with ``settings.fast``), in the order of the issue."""
    user = settings.user or "the login user"
    if not any(r.ok for r in reports):  # nothing to compare: the one failed check says why
        return [alike.check_reach(reports, user)]
    results = [
        alike.check_reach(reports, user),
        pairwise.check_pairwise(reports, user),
        alike.check_software(reports),
    ]
    if not settings.fast:
        datasets = mounts.check_exported(reports, settings.datasets, settings.exports, alike.check_datasets)
        results += [alike.check_hardware(reports), *datasets]
    results.append(limits.check_limits(reports))
    if not settings.fast:
        results += [
            network.check_names(reports),
            network.check_network(reports),
            network.check_rdma(reports),
            fabric.check_fabric(reports),
            health.check_time(reports),
            health.check_gpu_health(reports),
        ]
    return results


def doctor(hosts: list[Host], settings: DoctorSettings) -> DoctorRun:
    """Gather from every host, then check: the whole of `provision doctor` below the CLI."""
    seconds: dict[str, float] = {}
    reports = gather_reports(hosts, settings, seconds=seconds)
    started = time.monotonic()
    results = run_checks(reports, settings)
    seconds["checks"] = time.monotonic() - started
    perf = None
    if settings.perf is not None:
        from provision.doctor.perf import run_perf

        started = time.monotonic()
        perf = run_perf(hosts, reports, settings.perf, lambda host: open_session(host, settings.ssh))
        results += perf.results(sum(1 for r in reports if r.ok))
        seconds["perf"] = time.monotonic() - started
    return DoctorRun(results, reports, seconds, perf)


def fast_checks(hosts: list[Host], ssh: SshOptions, forks: int = DEFAULT_FORKS) -> list[CheckResult]:
    """The checks `provision launch --run` makes first (1, 2, 3, 6), as the login user, judged
    for a launch from the first host (:func:`for_launch`)."""
    settings = DoctorSettings(ssh=ssh, fast=True, forks=forks)
    reports = gather_reports(hosts, settings)
    return for_launch(run_checks(reports, settings), reports, hosts[0].name if hosts else "")


def for_launch(results: list[CheckResult], reports: list[NodeReport], first: str) -> list[CheckResult]:
    """The checks as they bear on an mpirun started on ``first``: SSH is needed from ``first`` to
    every node; pairs between the other nodes only matter for OpenMPI's tree spawn, which the
    launch turns off when they fail (:mod:`provision.launch.runner`). So a pairwise failure that
    spares ``first`` is a warning here, saying so; one from ``first`` still fails."""
    origin = next((r for r in reports if r.host == first), None)
    peers = [r.host for r in reports if r.ok and r.job_ids is not None and r.host != first]
    if origin is None or not origin.ok or any(origin.pairwise.get(peer, "not tried") for peer in peers):
        return results
    judged = []
    for result in results:
        if result.name == "pairwise ssh" and result.status == FAIL:
            result = replace(
                result,
                status=WARN,
                detail=f"{result.detail}; {first} reaches every node, so the launch runs from it without tree spawn",
            )
        judged.append(result)
    return judged
