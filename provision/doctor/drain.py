"""`doctor --drain`: doctor's verdict as Slurm marks, by LBNL NHC's rule (:mod:`provision.plans.slurm_marks`).

From one doctor run (:func:`drain_plan`, pure):

- each node a failing check holds at fault, in a check about the node itself
  (:data:`DRAINING`), is drained with ``provision: CHECK: what is wrong there`` (the first such
  check, in doctor's order);
- a bad link (and a slow link doctor cannot put on either end) drains neither node: it is
  reported, and ``launch --pick-healthy`` steps around it where it can;
- a node doctor could not reach is named and left as it is, neither drained nor resumed:
  from here a dead node and a lost path look the same, and Slurm marks a node whose slurmd stops
  answering DOWN itself;
- every other node reached is offered for a resume with the checks it passed in this run, and is
  resumed only when its reason is provision's and names one of them.

Checks that say nothing about the node itself are never a reason to drain: reaching it and its
job user, pairwise SSH and name resolution (a job started by Slurm needs neither), the clock
(a warning), a node left out of the bandwidth tests, the all-reduce (it names no node). Then
:func:`apply_marks` runs ``templates/commands/slurm-marks.sh.j2`` on the Slurm host, one round trip:
one ``sinfo`` for every node, then the rule on each (scontrol as the SSH user, or through
``sudo -n`` where Slurm refuses that user).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from provision.doctor.model import FAIL, LinkFinding
from provision.doctor.runner import DoctorRun, open_session
from provision.errors import ParseError, ProvisionError
from provision.inventory.model import Host
from provision.plans.slurm import node_name
from provision.plans.slurm_marks import MARKER, Mark, check_node_name, drain_reason, parse_marks
from provision.resources import render
from provision.text import printable
from provision.transport.options import SshOptions

# Checks whose failing nodes are drained (doctor's names; "dataset PATH", "perf tcp IFACE" and
# "perf rdma DEV:PORT" by their first words). Their bad nodes only: never the ends of a link.
DRAINING = ("software", "hardware", "dataset ", "limits", "network", "rdma", "fabric", "gpu health", "perf tcp ", "perf rdma ")
MARK_TIMEOUT_S = 120.0  # the mark script on the Slurm host: one sinfo, one scontrol per changed node


def drains(check: str) -> bool:
    """Whether a failure of ``check`` drains the node (see :data:`DRAINING`)."""
    return any(check == name or (name.endswith(" ") and check.startswith(name)) for name in DRAINING)


@dataclass(frozen=True)
class DrainPlan:
    """What one run asks of Slurm, by inventory host."""

    drain: dict[str, tuple[str, str]]  # host -> (check, reason)
    resume: dict[str, tuple[str, ...]]  # host -> the checks it passed (a reason naming one of them is lifted)
    not_reached: dict[str, str]  # host -> why: named, neither drained nor resumed
    links: tuple[LinkFinding, ...] = ()  # links at fault: reported, neither end drained


def _tested(run: DoctorRun) -> dict[str, set[str]]:
    """``perf KIND`` -> the nodes a measured link of that kind covers (a node a kind did not test
    did not pass it)."""
    tested: dict[str, set[str]] = {}
    if run.perf is not None:
        links = [*run.perf.links, *(run.perf.rdma.links if run.perf.rdma is not None else [])]
        for link in links:
            if link.gbps is not None:
                tested.setdefault(f"perf {link.kind}", set()).update((link.a, link.b))
    return tested


def drain_plan(run: DoctorRun) -> DrainPlan:
    """The drains, resumes, unreached nodes and links at fault of ``run`` (see the module)."""
    reached = [r.host for r in run.reports if r.ok]
    not_reached = {r.host: r.error for r in run.reports if not r.ok}
    tested = _tested(run)
    drain: dict[str, tuple[str, str]] = {}
    passed: dict[str, list[str]] = {host: [] for host in reached}
    for result in run.results:
        failing = {host: why for host, why in result.bad_nodes().items() if result.status_of(host) == FAIL}
        covered = tested.get(result.name, set()) if result.name.startswith(("perf tcp ", "perf rdma ")) else set(reached)
        for host in reached:
            if host in failing:
                if drains(result.name) and host not in drain:
                    drain[host] = (result.name, drain_reason(result.name, failing[host] or result.detail))
            elif host in covered:
                passed[host].append(result.name)
    resume = {host: tuple(checks) for host, checks in passed.items() if host not in drain}
    links = tuple(link for r in run.results for link in r.links if link.verdict in ("bad link", "slow link"))
    return DrainPlan(drain, resume, not_reached, links)


@dataclass(frozen=True)
class DrainReport:
    """What the Slurm host did: each node's mark (by inventory host), or why nothing was done."""

    slurm_host: str
    plan: DrainPlan
    marks: dict[str, Mark] = field(default_factory=dict)  # host -> what the rule did
    error: str = ""  # the Slurm host could not be reached, or sinfo failed: nothing was marked

    @property
    def ok(self) -> bool:
        """No error, and no scontrol that failed."""
        return not self.error and all(mark.outcome != "failed" for mark in self.marks.values())

    def to_dict(self) -> dict:
        """The ``--json`` form (``slurm``; docs/reference/doctor-json.md)."""
        return {
            "slurm_host": self.slurm_host,
            "marker": MARKER,
            "error": self.error or None,
            "nodes": [
                {"host": host, "node": mark.node, "outcome": mark.outcome, "detail": mark.detail}
                for host, mark in self.marks.items()
            ],
            "not_reached": [{"host": host, "why": why} for host, why in self.plan.not_reached.items()],
            "bad_links": [link.to_dict() for link in self.plan.links],
        }


def marks_script(calls: list[str]) -> str:
    """The script for the Slurm host (``calls``: ``provision_mark`` arguments, each one line of
    quoted shell words)."""
    return render("slurm-marks.sh.j2", marker=MARKER, calls=calls)


def mark_calls(plan: DrainPlan) -> tuple[list[str], dict[str, str]]:
    """(the script's calls, Slurm node name -> inventory host); ProvisionError when a host's
    node name is not one, or two hosts share one."""
    hosts: dict[str, str] = {}
    calls = []
    wanted = [(host, "drain", (reason,)) for host, (_, reason) in plan.drain.items()]
    wanted += [(host, "resume", checks) for host, checks in plan.resume.items()]
    for host, action, words in wanted:
        try:
            node = check_node_name(node_name(host))
        except ParseError as error:
            raise ProvisionError(f"host {host}: {error}") from None
        if hosts.setdefault(node, host) != host:
            raise ProvisionError(f"hosts {hosts[node]} and {host} are both Slurm node {node}: drain neither")
        calls.append(" ".join(shlex.quote(word) for word in (node, action, *words)))
    return calls, hosts


def apply_marks(plan: DrainPlan, slurm_host: Host, ssh: SshOptions) -> DrainReport:
    """Run the rule on the Slurm host for every node of ``plan`` (one round trip); a failure to
    reach it or to read Slurm's node states is the report's error: nothing was marked."""
    calls, hosts = mark_calls(plan)
    report = DrainReport(slurm_host.name, plan)
    if not calls:
        return report
    session = None
    try:
        session = open_session(slurm_host, ssh)
        done = session.run("sh -s", marks_script(calls), timeout=MARK_TIMEOUT_S)
    except Exception as error:  # noqa: BLE001 - said once, as the report's error
        return DrainReport(slurm_host.name, plan, error=f"{type(error).__name__}: {error}"[:300])
    finally:
        if session is not None:
            session.close()
    failed = next((line for line in done.stdout.splitlines() if line.startswith("sinfo-failed")), None)
    if failed is not None:
        return DrainReport(slurm_host.name, plan, error=f"sinfo on {slurm_host.name}: {printable(failed[13:], 300)}")
    try:
        marks = parse_marks(done.stdout)
    except ParseError as error:
        return DrainReport(slurm_host.name, plan, error=f"on {slurm_host.name}: {error}")
    by_host = {hosts[mark.node]: mark for mark in marks if mark.node in hosts}
    if len(by_host) < len(hosts):
        quiet = [node for node, host in hosts.items() if host not in by_host]
        why = printable(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.exit_code}", 200)
        return DrainReport(slurm_host.name, plan, by_host, f"the script said nothing of {', '.join(quiet[:6])} ({why})")
    return DrainReport(slurm_host.name, plan, {host: by_host[host] for host in hosts.values()})
