"""`launch --pick-healthy`: run doctor's fast checks (and ``--perf`` when asked) on every candidate,
then fill the shape from the hosts that passed (:func:`provision.plans.healthy.select_hosts`).

A host at fault is one a failing check names, with that check's name and detail as the reason.
From ``--perf`` (TCP and each RDMA rail judged apart), a bad node is left out; of a bad link only
its second host (inventory order) is, since either end removes the link; of a pair whose test
failed, the server's end (the one that refused the port, could not listen or did not answer).
"""

from __future__ import annotations

from collections.abc import Sequence

from provision.doctor.model import FAIL, CheckResult
from provision.doctor.perf import PerfSettings
from provision.doctor.perf_judge import decide
from provision.doctor.runner import DoctorRun, DoctorSettings, doctor
from provision.inventory.model import Host, Rack
from provision.plans.dims import Dims
from provision.plans.healthy import Selection, select_hosts
from provision.probe.run import DEFAULT_FORKS
from provision.transport.options import SshOptions


def at_fault(run: DoctorRun, order: Sequence[str]) -> dict[str, str]:
    """host -> why, from the failing checks of ``run``; ``order`` ranks hosts for bad links."""
    unhealthy: dict[str, str] = {}
    rank = {name: index for index, name in enumerate(order)}
    # judged per link below; one all-reduce over every host names no host of its own: not a reason to leave one out
    perf_checks = [r for r in run.results if r.name.startswith(("perf tcp", "perf rdma ", "perf nccl"))]
    kinds: dict[str, list] = {}
    if run.perf is not None:
        for link in [*run.perf.links, *(run.perf.rdma.links if run.perf.rdma is not None else [])]:
            kinds.setdefault(link.kind, []).append(link)
    for kind, links in kinds.items():  # each kind on its own (TCP, each RDMA rail), as doctor judged it
        verdict = decide(links)
        perf = "perf" if kind.startswith("tcp") else f"perf {kind}"
        for host, why in verdict.bad_nodes.items():
            unhealthy.setdefault(host, f"{perf}: bad node: {why}")
        for (a, b), why in verdict.bad_links.items():
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
    return select_hosts(dims, names, racks, at_fault(run, names))
