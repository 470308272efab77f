"""`doctor --perf`: one nccl-tests all-reduce over the planned rank file, where every node has GPUs
and ``all_reduce_perf`` on PATH.

The command follows NVIDIA/nccl-tests' README ("Usage"): "The number of process is managed by MPI
and is therefore not passed to the tests as argument. The total number of ranks (=CUDA devices)
will be equal to (number of processes)*(number of threads)*(number of GPUs per thread)", run as
``mpirun -np 10 ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 4``. Here: one rank per GPU (``-g 1``),
sizes 8 B to 1 GiB doubling (``-b 8 -e 1G -f 2``), started from the first host by the launch plan's
own mpirun line (:func:`provision.launch.job.mpirun_job`: the rank file, OpenMPI 5's hostfile,
``btl_tcp_if_include``, each rank's NIC), so the figure is the job's path. Across nodes nccl-tests
must be built with ``MPI=1`` (README "Build"). There are no peers to compare one all-reduce with: its
bus bandwidth (:func:`provision.facts.nccl_tests.parse_all_reduce`) is reported, and the check fails
only when the run failed (an exit, a report that does not parse, wrong values).
"""

from __future__ import annotations

import re
import shlex
import time
from concurrent.futures import ThreadPoolExecutor

from provision.doctor.model import FAIL, PASS, WARN, CheckResult
from provision.errors import ParseError, ProvisionError
from provision.facts.model import HostFacts
from provision.facts.nccl_tests import MAX_BYTES, parse_all_reduce
from provision.launch.job import LaunchOptions, MpirunJob, mpirun_job
from provision.plans.dims import Dims
from provision.plans.nics import plan_nics
from provision.plans.rankfile import plan_rankfile
from provision.text import printable, shown_value

NAME = "perf nccl all_reduce"
COMMAND = ("all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "1")
PREFLIGHT = "command -v all_reduce_perf >/dev/null 2>&1 && echo 'all_reduce_perf present' || echo 'all_reduce_perf missing'"
HINT = "build nccl-tests with MPI=1 (github.com/NVIDIA/nccl-tests) and put all_reduce_perf on PATH"
LIMIT_S = 300  # the run's own limit without a budget: 1 GiB all-reduces on a slow fabric take minutes
_TEMP_DIR = re.compile(r"/[A-Za-z0-9_./-]{1,200}")


def all_reduce_job(facts_list: list[HostFacts]) -> MpirunJob:
    """The launch plan for one rank per GPU on every host (X = the fewest GPUs of a host, Y = the
    hosts, Z = 1); :class:`ProvisionError` when it cannot be planned (said, not run)."""
    x = min(len(facts.gpus) for facts in facts_list)
    plan = plan_rankfile(Dims(x, len(facts_list), 1), facts_list)
    return mpirun_job(plan, plan_nics(plan), LaunchOptions(list(COMMAND)), time.strftime("%Y-%m-%d %H:%M:%S"))


def run_command(directory: str, argv: list[str], limit: int) -> str:
    """mpirun in ``directory`` under ``timeout``; its output capped; the directory removed after."""
    folder = shlex.quote(directory)
    return (
        f"out=$(cd {folder} && timeout -k 5 {limit} {shlex.join(argv)} 2>&1); rc=$?; rm -rf -- {folder}; "
        f'printf "%s\\n" "$out" | head -c {MAX_BYTES}; exit $rc'
    )


def all_reduce(names: list[str], facts: dict[str, HostFacts | None], sessions: dict, limit: int = LIMIT_S) -> CheckResult | None:
    """The check, or None where no node has a GPU (nothing to say)."""
    with_gpus = [name for name in names if facts.get(name) is not None and facts[name].gpus]
    if not with_gpus:
        return None
    if len(with_gpus) < len(names):
        lacking = [name for name in names if name not in with_gpus]
        return CheckResult(NAME, WARN, tuple(lacking), f"not run: no GPU on {', '.join(lacking)}"[:2000])
    missing = _lacking_tool(names, sessions)
    if missing:
        return CheckResult(
            NAME, WARN, tuple(missing), f"not run: no all_reduce_perf on PATH on {', '.join(missing)}: {HINT}"[:2000]
        )
    try:
        job = all_reduce_job([facts[name] for name in names])
    except ProvisionError as error:
        return CheckResult(NAME, WARN, (), f"not run: {error}"[:2000])
    first = job.plan.hosts[0].host
    return _run(job, first, sessions[first], limit)


def _lacking_tool(names: list[str], sessions: dict) -> list[str]:
    def check(name: str) -> bool:
        try:
            return sessions[name].run(PREFLIGHT, "", timeout=30).stdout.strip() == "all_reduce_perf present"
        except Exception:  # noqa: BLE001 - a node that cannot answer is said the same way
            return False

    with ThreadPoolExecutor(max_workers=max(1, min(32, len(names)))) as pool:
        return [name for name, present in zip(names, pool.map(check, names), strict=True) if not present]


def _run(job: MpirunJob, first: str, session, limit: int) -> CheckResult:
    hosts = tuple(host.host for host in job.plan.hosts)
    ranks = job.plan.dims.learners
    try:
        directory = session.run("mktemp -d", "", timeout=30).stdout.strip()
        if not _TEMP_DIR.fullmatch(directory):
            return CheckResult(NAME, FAIL, (first,), f"{first}: mktemp -d gave {shown_value(printable(directory, 80))}")
        for name, text in job.remote.items():
            session.run(f"cat > {shlex.quote(directory)}/{shlex.quote(name)}", text, timeout=30)
        done = session.run(run_command(directory, job.argv(directory), limit), "", timeout=limit + 30)
    except Exception as error:  # noqa: BLE001 - a lost or hung run is the check's failure, named
        return CheckResult(
            NAME, FAIL, (first,), f"the all-reduce from {first} did not finish: {type(error).__name__}: {error}"[:300]
        )
    last = printable((done.stdout.strip().splitlines() or [""])[-1], 200)
    if done.exit_code == 124:
        return CheckResult(NAME, FAIL, hosts, f"the all-reduce hung: stopped after {limit}s ({last})"[:300])
    try:
        report = parse_all_reduce(done.stdout)
    except ParseError as error:
        return CheckResult(NAME, FAIL, hosts, f"mpirun exit {done.exit_code}: {error}; last line: {last}"[:300])
    if done.exit_code != 0 or report.wrong:
        why = f"{report.wrong} wrong values" if report.wrong else f"mpirun exit {done.exit_code}"
        return CheckResult(NAME, FAIL, hosts, f"the all-reduce failed: {why}"[:300])
    return CheckResult(
        NAME,
        PASS,
        (),
        f"bus bandwidth {report.busbw_gbytes:.3g} GB/s (nccl-tests' average over the sizes), "
        f"{report.largest_busbw_gbytes:.3g} GB/s at {report.largest_bytes} bytes; {ranks} ranks on {len(hosts)} hosts "
        f"({job.plan.dims}); one run, no peers to compare: reported, not judged",
    )
