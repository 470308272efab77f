"""`launch --pick-healthy`: run doctor's fast checks (and ``--perf`` when asked) on every candidate,
then fill the shape from the hosts that passed (:func:`provision.plans.healthy.fill_shape`).

A host at fault is one a failing check names, with that check's name and detail as the reason.
From ``--perf`` (TCP and each RDMA rail judged apart), a bad node is left out; of a pair whose test
failed, the server's end (the one that refused the port, could not listen or did not answer). A
bad link is stepped around where the candidates allow it: its second host (inventory order) is
left out, since either end removes the link; when the shape cannot be filled without it, both
ends are kept and the selection says which bad links the job will cross (two sound nodes are
not lost for a cable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from provision.doctor.model import FAIL, CheckResult
from provision.doctor.perf import PerfSettings
from provision.doctor.runner import DoctorRun, DoctorSettings, doctor
from provision.errors import PlanError
from provision.inventory.model import Host, Rack
from provision.plans.dims import Dims
from provision.plans.healthy import Selection, fill_shape
from provision.probe.run import DEFAULT_FORKS
from provision.transport.options import SshOptions


def at_fault(run: DoctorRun, order: Sequence[str], *, bad_links: bool = True) -> dict[str, str]:
    """host -> why, from the failing checks of ``run``; ``order`` ranks hosts for bad links (the
    later end of each is left out; none with ``bad_links`` false)."""
    unhealthy: dict[str, str] = {}
    rank = {name: index for index, name in enumerate(order)}
    # judged per link below; one all-reduce over every host names no host of its own: not a reason to leave one out
    perf_checks = [r for r in run.results if r.name.startswith(("perf tcp", "perf rdma ", "perf nccl"))]
    kinds: dict[str, list] = {}
    if run.perf is not None:
        for link in [*run.perf.links, *(run.perf.rdma.links if run.perf.rdma is not None else [])]:
            kinds.setdefault(link.kind, []).append(link)
    for kind, links in kinds.items():  # each kind on its own (TCP, each RDMA rail), as doctor judged it
        verdict = run.perf.verdicts[kind]  # the verdict doctor's checks gave (judged once per run)
        perf = "perf" if kind.startswith("tcp") else f"perf {kind}"
        for host, why in verdict.bad_nodes.items():
            unhealthy.setdefault(host, f"{perf}: bad node: {why}")
        for (a, b), why in verdict.bad_links.items() if bad_links else ():
            later = max((a, b), key=lambda name: rank.get(name, len(rank)))
            unhealthy.setdefault(later, f"{perf}: bad link {a}-{b}: {why}")
        for link in links:
            if link.gbps is None:  # the server's end: the one that refused, hung or could not listen
                unhealthy.setdefault(link.b, f"{perf}: {link.pair}: {link.error}"[:200])
        for (a, b), why in verdict.unsure.items():
            for host in (a, b):
                unhealthy.setdefault(host, f"{perf}: slow link {a}-{b}: {why}"[:200])
    for result in run.results:
        if result.status == FAIL and result not in perf_checks:
            for host in result.hosts:
                unhealthy.setdefault(host, _reason(result))
    return unhealthy


def _reason(result: CheckResult) -> str:
    return f"{result.name}: {result.detail}"[:200]


def pick_healthy(
    dims: Dims,
    candidates: list[Host],
    racks: Sequence[Rack],
    ssh: SshOptions,
    perf: PerfSettings | None = None,
    forks: int = DEFAULT_FORKS,
) -> Selection:
    """The hosts to launch on (:class:`~provision.errors.PlanError` when too few are healthy)."""
    names = [host.name for host in candidates]
    run = doctor(candidates, DoctorSettings(ssh=ssh, fast=True, forks=forks, perf=perf))
    return select_around_links(dims, names, racks, run)


def select_around_links(dims: Dims, names: list[str], racks: Sequence[Rack], run: DoctorRun) -> Selection:
    """The hosts for ``dims`` without any host at fault, stepping around each bad link where the
    candidates allow it, else across it (said in the selection's notes)."""
    try:
        return fill_shape(dims, names, racks, at_fault(run, names))
    except PlanError:
        hard = at_fault(run, names, bad_links=False)
        chosen = fill_shape(dims, names, racks, hard)  # too few even so: that PlanError is the answer
    crossed = sorted(
        f"{link.a}-{link.b}"
        for result in run.results
        for link in result.links
        if link.verdict == "bad link" and link.a in chosen.hosts and link.b in chosen.hosts
    )
    if not crossed:
        return chosen
    note = f"kept both ends of bad link(s) {', '.join(crossed)}: too few healthy hosts to leave one end out"
    return replace(chosen, notes=(*chosen.notes, note))
