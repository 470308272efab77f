"""doctor's checks that the nodes are alike: every node reached with the job user's uid:gid
(check 1), the same software (3) and hardware (4), each dataset the same on every node (5).

Each names the hosts at fault and says, in one line, what differs, where, and what the majority
has. Unreachable nodes fail check 1 only; every other check looks at the nodes that answered.
"""

from __future__ import annotations

from collections.abc import Callable

from provision.doctor.compare import answered, compare, hosts_list, majority
from provision.doctor.model import FAIL, PASS, WARN, CheckResult, NodeReport
from provision.facts.registry import kept_facts

MEMORY_TOLERANCE = 0.05  # nodes whose memory is within 5 % of the majority's count as equal


def check_reach(reports: list[NodeReport], user: str) -> CheckResult:
    """Check 1: every node answered; the job user exists on each with one uid and gid."""
    name = "reach + job user"
    down = [r for r in reports if not r.ok]
    reached = answered(reports)
    missing = [r.host for r in reached if r.job_ids is None]
    ids = {r.host: r.job_ids for r in reached if r.job_ids is not None}
    problems = []
    nodes = {r.host: f"not reached: {r.error}" for r in down}
    if down:
        more = f" (+{len(down) - 4} more)" if len(down) > 4 else ""
        problems.append("; ".join(f"{r.host}: {r.error}" for r in down[:4]) + more)
    if missing:
        problems.append(f"no user {user} on {hosts_list(missing)} (cluster_users + provision setup-cluster make it)")
        nodes.update(dict.fromkeys(missing, f"no user {user}"))
    if ids:
        common, odd = majority(ids)
        if odd:
            differ = ", ".join(f"{ids[h][0]}:{ids[h][1]} on {h}" for h in odd[:6])
            problems.append(f"{user} has uid:gid {differ}; the others {common[0]}:{common[1]}")
            nodes.update({h: f"{user} has uid:gid {ids[h][0]}:{ids[h][1]} (the others {common[0]}:{common[1]})" for h in odd})
    if problems:
        return CheckResult(name, FAIL, tuple(nodes), "; ".join(problems), nodes=nodes)
    uid, gid = next(iter(ids.values())) if ids else ("?", "?")
    return CheckResult(name, PASS, (), f"{len(reports)} node(s) reached; {user} is {uid}:{gid} on each")


def _openmpi(report: NodeReport) -> str:
    mpi = report.facts.openmpi
    if not mpi.version:
        return ""
    build = {True: "CUDA-aware", False: "not CUDA-aware", None: "CUDA support unknown"}[mpi.cuda_aware]
    return f"{mpi.version} ({build})"


def declared(check: str) -> tuple[dict[str, Callable[[NodeReport], str]], dict[str, str]]:
    """The kept facts declared ``compared=check`` (:mod:`provision.facts.registry`): ``{column: a
    node's value as shown}`` and ``{column: what a node that differs earns}``."""
    facts = [fact for fact in kept_facts() if fact.compared == check]

    def value_of(fact):
        return lambda r: fact.shown(r.facts.kept[fact.name]) if fact.name in r.facts.kept else ""

    return {fact.column: value_of(fact) for fact in facts}, {fact.column: fact.differ for fact in facts}


def check_software(reports: list[NodeReport]) -> CheckResult:
    """Check 3: OpenMPI version and build, NVIDIA driver, CUDA runtime, NCCL, Anaconda's Python,
    and every kept fact declared ``compared="software"``."""
    what, statuses = declared("software")
    return compare(
        "software",
        reports,
        {
            "OpenMPI": _openmpi,
            "NVIDIA driver": lambda r: r.software.nvidia_driver,
            "CUDA runtime": lambda r: r.software.cuda_runtime,
            "NCCL": lambda r: r.software.nccl,
            "Anaconda": lambda r: r.software.conda_python,
            **what,
        },
        statuses=statuses,
    )


def check_hardware(reports: list[NodeReport]) -> CheckResult:
    """Check 4: sockets x cores x threads, GPU count and model alike (fail), and every kept fact
    declared ``compared="hardware"``; memory within :data:`MEMORY_TOLERANCE` (warn)."""

    def gpus(report: NodeReport) -> str:
        models = sorted({g.name for g in report.facts.gpus})
        return f"{len(report.facts.gpus)} x {'/'.join(models)}" if report.facts.gpus else "0"

    what, statuses = declared("hardware")
    shape = compare(
        "hardware",
        reports,
        {"arch": lambda r: r.facts.arch, "sockets x cores x threads": lambda r: r.facts.cpu.shape(), "GPUs": gpus, **what},
        statuses=statuses,
    )
    memory = {r.host: r.facts.memory_mib for r in answered(reports) if r.facts.memory_mib}
    if not memory:
        return shape
    typical = sorted(memory.values())[len(memory) // 2]
    odd = [h for h, mib in memory.items() if abs(mib - typical) > MEMORY_TOLERANCE * typical]
    if not odd:
        return shape
    differ = ", ".join(f"{memory[h] // 1024} GiB on {h}" for h in odd[:6])
    note = f"memory: {differ}; the others about {typical // 1024} GiB"
    nodes = dict(shape.nodes)
    for host in odd:
        said = f"memory {memory[host] // 1024} GiB (the others about {typical // 1024} GiB)"
        nodes[host] = f"{nodes[host]}; {said}" if host in nodes else said
    if shape.status == PASS:
        return CheckResult("hardware", WARN, tuple(odd), note, nodes=nodes)
    node_status = {**shape.node_status, **{host: WARN for host in odd if host not in shape.nodes}}
    return CheckResult("hardware", shape.status, tuple(nodes), f"{shape.detail}; {note}", nodes=nodes, node_status=node_status)


def check_datasets(reports: list[NodeReport], paths: tuple[str, ...]) -> list[CheckResult]:
    """Check 5: each dataset exists on every node with the same manifest."""
    results = []
    for index, path in enumerate(paths):
        name = f"dataset {path}"
        manifests = {r.host: r.datasets[index] for r in answered(reports) if index < len(r.datasets)}
        missing = [h for h, m in manifests.items() if not m.exists]
        present = {h: m for h, m in manifests.items() if m.exists}
        if not present:
            nodes = dict.fromkeys(missing, f"{path} missing")
            results.append(CheckResult(name, FAIL, tuple(missing), f"{path} is missing on every node", nodes=nodes))
            continue
        keys = {h: (m.files, m.size, m.listing_hash, m.content_hash) for h, m in present.items()}
        common, odd = majority(keys)

        def said(key) -> str:
            files, size, listing, content = key
            return f"{files} files, {size} B, listing {listing[:8]}" + (f", content {content[:8]}" if content else "")

        problems = []
        if missing:
            problems.append(f"missing on {hosts_list(missing)}")
        if odd:
            problems.append("; ".join(f"{h} has {said(keys[h])}" for h in odd[:4]) + f"; the others {said(common)}")
        if problems:
            nodes = dict.fromkeys(missing, f"{path} missing") | {
                h: f"{path}: {said(keys[h])} (the others {said(common)})" for h in odd
            }
            results.append(CheckResult(name, FAIL, tuple(missing + odd), "; ".join(problems), nodes=nodes))
        else:
            results.append(CheckResult(name, PASS, (), f"same on every node: {said(common)}"))
    return results
