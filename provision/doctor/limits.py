"""doctor's limits check (6): what an SSH session of the job user gets on each node (memlock, open
files) and the size of /dev/shm, with the limits.conf line that fixes each warning."""

from __future__ import annotations

from collections import Counter

from provision.doctor.compare import answered, hosts_list, worst
from provision.doctor.model import FAIL, PASS, WARN, CheckResult, Limits, NodeReport

NOFILE_MIN = 4096
SHM_PER_GPU_MIB = 512  # /dev/shm below this per GPU (at least one) warns: NCCL and data loaders use it


def session_limits(report: NodeReport, reports: list[NodeReport]) -> tuple[Limits | None, str]:
    """The limits the job user gets in an SSH session on ``report``'s node, and where that comes
    from: what its sshd gave the peers' sessions (most common), else our own session when we
    logged in as the job user, else None."""
    seen = [r.peer_limits[report.host] for r in reports if r.ok and report.host in r.peer_limits]
    if seen:
        return Counter(seen).most_common(1)[0][0], "peer sessions"
    if report.own_limits is not None and report.job_ids is not None and report.login_job:
        return report.own_limits, "own session"
    return None, ""


def _kib(value: int) -> str:
    return f"{value // 1024} MiB" if value >= 1024 and value % 1024 == 0 else f"{value} KiB"


# What to do, said with each warning (limits.conf(5); sshd applies it to new sessions with UsePAM yes).
LIMIT_FIXES = {
    "memlock": "Fix: the line `*  -  memlock  unlimited` in /etc/security/limits.d/99-memlock.conf on those nodes "
    "(sshd with UsePAM yes; a new SSH session sees it)",
    "open files": f"Fix: the line `*  -  nofile  {NOFILE_MIN}` in /etc/security/limits.d/99-nofile.conf on those nodes",
    "/dev/shm": "Fix: remount it bigger (mount -o remount,size=<N>G) and set that size= in its fstab line "
    "(a container: --shm-size)",
}


def check_limits(reports: list[NodeReport]) -> CheckResult:
    """Check 6: memlock unlimited (fail where an RDMA device exists, else warn), open files at
    least :data:`NOFILE_MIN`, /dev/shm at least :data:`SHM_PER_GPU_MIB` per GPU (warn). Nodes
    with the same value are grouped, the smallest group first: what differs stands out."""
    name = "limits"
    found: dict[str, dict[str, list[str]]] = {"memlock": {}, "open files": {}, "/dev/shm": {}, "unknown": {}}
    statuses: dict[str, str] = {}

    def add(kind: str, value: str, host: str, status: str) -> None:
        found[kind].setdefault(value, []).append(host)
        statuses[host] = worst([statuses.get(host, PASS), status])

    for report in answered(reports):
        limits, _ = session_limits(report, reports)
        if limits is None:
            add("unknown", "limits unknown (no SSH session as the job user reached it)", report.host, WARN)
        else:
            if limits.memlock_kib is not None:
                rdma = bool(report.facts.rdma_ports())
                value = _kib(limits.memlock_kib) + (" with an RDMA device (verbs/NCCL cannot register memory)" if rdma else "")
                add("memlock", value, report.host, FAIL if rdma else WARN)
            if limits.nofile is not None and limits.nofile < NOFILE_MIN:
                add("open files", str(limits.nofile), report.host, WARN)
        gpus = len(report.facts.gpus)
        wanted = SHM_PER_GPU_MIB * 1024 * max(1, gpus)
        if report.shm_kib is not None and report.shm_kib < wanted:
            per_gpus = f" for {gpus} GPU(s)" if gpus else ""
            add("/dev/shm", f"{_kib(report.shm_kib)} (< {_kib(wanted)}{per_gpus})", report.host, WARN)
    headings = {
        "memlock": "memlock not unlimited: ",
        "open files": f"open files < {NOFILE_MIN}: ",
        "/dev/shm": "/dev/shm small: ",
        "unknown": "",
    }
    problems = []
    for kind, groups in found.items():
        if groups:
            ordered = sorted(groups.items(), key=lambda item: len(item[1]))
            problems.append(headings[kind] + "; ".join(f"{value} on {hosts_list(hosts)}" for value, hosts in ordered))
            if LIMIT_FIXES.get(kind):
                problems.append(LIMIT_FIXES[kind])
    if problems:
        nodes: dict[str, str] = {}
        for kind, groups in found.items():
            for value, hosts in groups.items():
                for host in hosts:
                    said = value if kind == "unknown" else f"{kind} {value}"
                    nodes[host] = f"{nodes[host]}; {said}" if host in nodes else said
        status = worst(list(statuses.values()))
        return CheckResult(name, status, tuple(statuses), ". ".join(problems), nodes=nodes, node_status=statuses)
    return CheckResult(name, PASS, (), f"memlock unlimited, open files >= {NOFILE_MIN}, /dev/shm large enough on every node")
