"""`doctor --json`: the verdict as a document a program reads (schema ``provision.doctor``, version
:data:`VERSION`, described field by field in docs/reference/doctor-json.md).

One object: the verdict and its exit code, the nodes in inventory order, every check with its bad
nodes, bad links, thresholds, coverage and what to do (``fix``) as fields, the bandwidth tests
(``perf``: per kind of link, every pair's figures both ways and the matrix of them, node by node,
ready for a heat map), with ``--drain`` what Slurm was asked and did (``slurm``), and what a
report drawn from it later needs: when it ran, with which provision and inventory, the racks and
each distinct node layout. Fields are only ever added within a version; a field renamed, removed
or given another meaning makes the next one.

>>> from provision.doctor.model import CheckResult
>>> document([CheckResult("time", "pass", (), "every clock within 0.01 s")], ["n1"])["verdict"]
{'line': 'ready: all 1 checks pass', 'exit_code': 0, 'ready': True}
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision import __version__
from provision.doctor.fixes import fix_for
from provision.doctor.model import CheckResult
from provision.doctor.perf_judge import NODE, SLOW, Link, Verdict, decide
from provision.doctor.verdict import verdict

if TYPE_CHECKING:
    from provision.doctor.drain import DrainReport
    from provision.doctor.perf import PerfRun

SCHEMA = "provision.doctor"
VERSION = 1


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def link_verdicts(links: list[Link], judged: Verdict | None = None) -> dict[tuple[str, str], str]:
    """(a, b) -> how doctor judged that test: ok, slow (a bad node's link), bad link, slow link
    (not placed on a node or a link) or failed (``judged``: :func:`decide` of ``links``, when known)."""
    judged = decide(links) if judged is None else judged
    verdicts = {}
    for link in links:
        pair = (link.a, link.b)
        if link.gbps is None:
            verdicts[pair] = "failed"
        elif pair in judged.bad_links:
            verdicts[pair] = "bad link"
        elif pair in judged.unsure:
            verdicts[pair] = "slow link"
        elif judged.threshold is not None and link.gbps < judged.threshold:
            verdicts[pair] = "slow"
        else:
            verdicts[pair] = "ok"
    return verdicts


def kind_document(kind: str, links: list[Link], order: list[str], judged: Verdict | None = None) -> dict:
    """One kind of link: the judgement's figures, every test, and the matrix ``gbps[i][j]``: what
    ``nodes[i]`` sent to ``nodes[j]`` (Gbit/s; null: not measured). ``judged``: :func:`decide` of
    ``links`` when the caller has it (the run's, :attr:`PerfRun.verdicts`)."""
    judged = decide(links) if judged is None else judged
    verdicts = link_verdicts(links, judged)
    seen = {end for link in links for end in (link.a, link.b)}
    nodes = [host for host in order if host in seen] + sorted(seen - set(order))
    index = {host: i for i, host in enumerate(nodes)}
    matrix: list[list[float | None]] = [[None] * len(nodes) for _ in nodes]
    for link in links:
        forward, reverse = link.forward_gbps, link.reverse_gbps
        if forward is None and reverse is None:
            forward = link.gbps  # one figure, no direction told: the client's
        matrix[index[link.a]][index[link.b]] = _round(forward)
        matrix[index[link.b]][index[link.a]] = _round(reverse)
    return {
        "kind": kind,
        "check": f"perf {kind}",
        "unit": "Gbit/s",
        "median_gbps": _round(judged.median),
        "slow_below_gbps": _round(judged.threshold),
        "slow_share": SLOW,
        "node_share": NODE,
        "bad_nodes": [{"host": host, "why": why} for host, why in judged.bad_nodes.items()],
        "nodes": nodes,
        "matrix_gbps": matrix,
        "links": [
            {
                "a": link.a,
                "b": link.b,
                "verdict": verdicts[(link.a, link.b)],
                "gbps": _round(link.gbps),
                "forward_gbps": _round(link.forward_gbps),
                "reverse_gbps": _round(link.reverse_gbps),
                "rtt_us": _round(link.rtt_us),
                "latency_us": _round(link.latency_us),
                "error": link.error or None,
            }
            for link in links
        ],
    }


def perf_document(perf: PerfRun, order: list[str]) -> dict:
    """``perf``: the interface, coverage, the nodes left out and one entry per kind of link."""
    links = [*perf.links, *(perf.rdma.links if perf.rdma is not None else [])]
    kinds: dict[str, list[Link]] = {}
    for link in links:
        kinds.setdefault(link.kind, []).append(link)
    return {
        "interface": perf.interface,
        "seconds": round(perf.seconds, 3),
        "coverage": perf.coverage.to_dict(),
        "left_out": [{"host": host, "why": why} for host, why in perf.left_out.items()],
        "kinds": [kind_document(kind, kind_links, order, perf.verdicts.get(kind)) for kind, kind_links in kinds.items()],
    }


def document(
    results: list[CheckResult],
    order: list[str],
    *,
    strict: bool = False,
    perf: PerfRun | None = None,
    drain: DrainReport | None = None,
    generated_at: str | None = None,
    inventory: str | None = None,
    racks: list[dict] | None = None,
    layouts: list[dict] | None = None,
) -> dict:
    """The whole ``--json`` document (``order``: the hosts as the run took them; ``generated_at``:
    when it ran, UTC; ``inventory``: its file; ``racks``: ``{name, hosts}`` of the run's hosts;
    ``layouts``: :func:`provision.doctor.layouts.node_layouts`)."""
    line, code = verdict(results, strict)
    exit_code = 1 if drain is not None and not drain.ok else code  # a drain that failed fails the run
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "verdict": {"line": line, "exit_code": exit_code, "ready": code == 0},
        "nodes": list(order),
        "checks": [result.to_dict() | {"fix": fix_for(result.name, result.status)} for result in results],
        "perf": perf_document(perf, order) if perf is not None else None,
        "slurm": drain.to_dict() if drain is not None else None,
        "generated_at": generated_at,
        "provision_version": __version__,
        "inventory": inventory,
        "racks": racks or [],
        "layouts": layouts or [],
    }
