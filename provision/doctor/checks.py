"""The cross-node checks: pure functions of the nodes' reports, one :class:`CheckResult` each.

Each names the hosts at fault and says, in one line, what differs, where, and what the majority
has. Unreachable nodes fail check 1 only; every other check looks at the nodes that answered.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Callable, Hashable

from provision.doctor.model import FAIL, PASS, SEVERITY, WARN, CheckResult, Limits, NodeReport

MEMORY_TOLERANCE = 0.05  # nodes whose memory is within 5 % of the majority's count as equal
NOFILE_MIN = 4096
SHM_PER_GPU_MIB = 512  # /dev/shm below this per GPU (at least one) warns: NCCL and data loaders use it
CLOCK_WARN_S = 1.0


def majority(values: dict[str, Hashable]) -> tuple[Hashable, list[str]]:
    """The most common value (the first node's on a tie) and the hosts that differ from it."""
    if not values:
        return None, []
    counts = Counter(values.values())
    top = max(counts.values())
    winner = next(v for v in values.values() if counts[v] == top)
    return winner, [host for host, value in values.items() if value != winner]


def _worst(statuses: list[str]) -> str:
    return max(statuses, key=SEVERITY.__getitem__, default=PASS)


def _reached(reports: list[NodeReport]) -> list[NodeReport]:
    return [r for r in reports if r.ok]


def _hosts_list(hosts: list[str], limit: int = 6) -> str:
    return ", ".join(hosts[:limit]) + (f" and {len(hosts) - limit} more" if len(hosts) > limit else "")


def check_reach(reports: list[NodeReport], user: str) -> CheckResult:
    """Check 1: every node answered; the job user exists on each with one uid and gid."""
    name = "reach + job user"
    down = [r for r in reports if not r.ok]
    reached = _reached(reports)
    missing = [r.host for r in reached if r.job_ids is None]
    ids = {r.host: r.job_ids for r in reached if r.job_ids is not None}
    problems, hosts = [], []
    if down:
        more = f" (+{len(down) - 4} more)" if len(down) > 4 else ""
        problems.append("; ".join(f"{r.host}: {r.error}" for r in down[:4]) + more)
        hosts += [r.host for r in down]
    if missing:
        problems.append(f"no user {user} on {_hosts_list(missing)} (cluster_users + provision setup-cluster make it)")
        hosts += missing
    if ids:
        common, odd = majority(ids)
        if odd:
            differ = ", ".join(f"{ids[h][0]}:{ids[h][1]} on {h}" for h in odd[:6])
            problems.append(f"{user} has uid:gid {differ}; the others {common[0]}:{common[1]}")
            hosts += odd
    if problems:
        return CheckResult(name, FAIL, tuple(hosts), "; ".join(problems))
    uid, gid = next(iter(ids.values())) if ids else ("?", "?")
    return CheckResult(name, PASS, (), f"{len(reports)} node(s) reached; {user} is {uid}:{gid} on each")


def _compare(
    name: str, reports: list[NodeReport], what: dict[str, Callable[[NodeReport], str]], status: str = FAIL
) -> CheckResult:
    """A check that every node shows the same value of each ``what`` (absent: ``none``); a mix
    names the minority, what it has and what the others have."""
    reached = _reached(reports)
    problems, hosts, shown = [], [], []
    for label, value_of in what.items():
        values = {r.host: value_of(r) or "none" for r in reached}
        if set(values.values()) <= {"none"}:
            continue
        common, odd = majority(values)
        shown.append(f"{label} {common}")
        if odd:
            groups: dict[str, list[str]] = {}
            for host in odd:
                groups.setdefault(values[host], []).append(host)
            problems.append(
                f"{label}: " + "; ".join(f"{value} on {_hosts_list(h)}" for value, h in groups.items()) + f"; the others {common}"
            )
            hosts += [h for h in odd if h not in hosts]
    if problems:
        return CheckResult(name, status, tuple(hosts), "; ".join(problems))
    return CheckResult(name, PASS, (), ("same on every node: " + ", ".join(shown)) if shown else "nothing to compare")


def _openmpi(report: NodeReport) -> str:
    mpi = report.facts.openmpi
    if not mpi.version:
        return ""
    build = {True: "CUDA-aware", False: "not CUDA-aware", None: "CUDA support unknown"}[mpi.cuda_aware]
    return f"{mpi.version} ({build})"


def check_software(reports: list[NodeReport]) -> CheckResult:
    """Check 3: OpenMPI version and build, NVIDIA driver, CUDA runtime, NCCL, Anaconda's Python."""
    return _compare(
        "software",
        reports,
        {
            "OpenMPI": _openmpi,
            "NVIDIA driver": lambda r: r.software.nvidia_driver,
            "CUDA runtime": lambda r: r.software.cuda_runtime,
            "NCCL": lambda r: r.software.nccl,
            "Anaconda": lambda r: r.software.conda_python,
        },
    )


def check_hardware(reports: list[NodeReport]) -> CheckResult:
    """Check 4: sockets x cores x threads, GPU count and model alike (fail); memory within
    :data:`MEMORY_TOLERANCE` (warn)."""

    def gpus(report: NodeReport) -> str:
        models = sorted({g.name for g in report.facts.gpus})
        return f"{len(report.facts.gpus)} x {'/'.join(models)}" if report.facts.gpus else "0"

    shape = _compare(
        "hardware",
        reports,
        {"arch": lambda r: r.facts.arch, "sockets x cores x threads": lambda r: r.facts.cpu.shape(), "GPUs": gpus},
    )
    memory = {r.host: r.facts.memory_mib for r in _reached(reports) if r.facts.memory_mib}
    if not memory:
        return shape
    typical = sorted(memory.values())[len(memory) // 2]
    odd = [h for h, mib in memory.items() if abs(mib - typical) > MEMORY_TOLERANCE * typical]
    if not odd:
        return shape
    differ = ", ".join(f"{memory[h] // 1024} GiB on {h}" for h in odd[:6])
    note = f"memory: {differ}; the others about {typical // 1024} GiB"
    if shape.status == PASS:
        return CheckResult("hardware", WARN, tuple(odd), note)
    hosts = shape.hosts + tuple(h for h in odd if h not in shape.hosts)
    return CheckResult("hardware", shape.status, hosts, f"{shape.detail}; {note}")


def check_datasets(reports: list[NodeReport], paths: tuple[str, ...]) -> list[CheckResult]:
    """Check 5: each dataset exists on every node with the same manifest."""
    results = []
    for index, path in enumerate(paths):
        name = f"dataset {path}"
        manifests = {r.host: r.datasets[index] for r in _reached(reports) if index < len(r.datasets)}
        missing = [h for h, m in manifests.items() if not m.exists]
        present = {h: m for h, m in manifests.items() if m.exists}
        if not present:
            results.append(CheckResult(name, FAIL, tuple(missing), f"{path} is missing on every node"))
            continue
        keys = {h: (m.files, m.size, m.listing_hash, m.content_hash) for h, m in present.items()}
        common, odd = majority(keys)

        def said(key) -> str:
            files, size, listing, content = key
            return f"{files} files, {size} B, listing {listing[:8]}" + (f", content {content[:8]}" if content else "")

        problems = []
        if missing:
            problems.append(f"missing on {_hosts_list(missing)}")
        if odd:
            problems.append("; ".join(f"{h} has {said(keys[h])}" for h in odd[:4]) + f"; the others {said(common)}")
        if problems:
            results.append(CheckResult(name, FAIL, tuple(missing + odd), "; ".join(problems)))
        else:
            results.append(CheckResult(name, PASS, (), f"same on every node: {said(common)}"))
    return results


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
        statuses[host] = _worst([statuses.get(host, PASS), status])

    for report in _reached(reports):
        limits, _ = session_limits(report, reports)
        if limits is None:
            add("unknown", "limits unknown (no SSH session as the job user reached it)", report.host, WARN)
        else:
            if limits.memlock_kib is not None:
                rdma = bool(report.ib_ports)
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
            problems.append(headings[kind] + "; ".join(f"{value} on {_hosts_list(hosts)}" for value, hosts in ordered))
            if LIMIT_FIXES.get(kind):
                problems.append(LIMIT_FIXES[kind])
    if problems:
        return CheckResult(name, _worst(list(statuses.values())), tuple(statuses), ". ".join(problems))
    return CheckResult(name, PASS, (), f"memlock unlimited, open files >= {NOFILE_MIN}, /dev/shm large enough on every node")


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_names(reports: list[NodeReport]) -> CheckResult:
    """Check 7: every node resolves every peer's name to one address, and no node resolves its
    own name to a loopback address (127.0.1.1) while its peers reach it on a real one."""
    name = "names"
    reached = [r for r in _reached(reports) if r.resolved]
    problems, hosts = [], []
    for target in (r.host for r in reached):
        by_peer = {r.host: r.resolved.get(target, "") for r in reached if r.host != target}
        unresolved = [h for h, a in by_peer.items() if not a]
        if unresolved:
            problems.append(f"{_hosts_list(unresolved)} cannot resolve {target}")
            hosts += [h for h in unresolved if h not in hosts]
        known = {h: a for h, a in by_peer.items() if a}
        if not known:
            continue
        common, odd = majority(known)
        if odd:
            problems.append(f"{target} is " + ", ".join(f"{known[h]} on {h}" for h in odd[:4]) + f"; {common} on the others")
            hosts += [h for h in odd if h not in hosts]
        own = next(r for r in reached if r.host == target).resolved.get(target, "")
        if own and _loopback(own) and not _loopback(common):
            problems.append(f"{target} resolves its own name to {own}, its peers to {common} (OpenMPI/torchrun hang)")
            hosts += [target] if target not in hosts else []
    if problems:
        return CheckResult(name, FAIL, tuple(hosts), "; ".join(problems))
    unread = [r.host for r in _reached(reports) if not r.resolved]
    if unread:  # the lookups run in the job user's session: none there is nothing checked, not a pass
        why = "no session as the job user ran there"
        return CheckResult(name, WARN, tuple(unread), f"not checked on {_hosts_list(unread)} ({why})")
    return CheckResult(name, PASS, (), f"every node resolves all {len(reached)} names alike")


def _subnets(report: NodeReport) -> dict[str, str]:
    """``{interface: IPv4 subnet}`` of the node's up, non-loopback interfaces."""
    subnets = {}
    for interface in report.facts.interfaces:
        if not interface.up:
            continue
        for address in interface.addresses:
            parsed = ipaddress.ip_interface(address) if "/" in address else None
            if parsed and parsed.version == 4 and not parsed.is_loopback:
                subnets[interface.name] = str(parsed.network)
                break
    return subnets


def check_network(reports: list[NodeReport]) -> CheckResult:
    """Check 8: an interface with one subnet common to every node (for btl_tcp_if_include and
    NCCL_SOCKET_IFNAME), with one MTU everywhere."""
    name = "network"
    reached = [r for r in _reached(reports) if r.facts.interfaces]
    if not reached:
        return CheckResult(name, WARN, (), "no node reported its interfaces (ip not installed?)")
    subnets = {r.host: _subnets(r) for r in reached}
    common = set.intersection(*(set(s.items()) for s in subnets.values()))
    if not common:
        names = Counter(n for s in subnets.values() for n in s)
        best = names.most_common(1)[0][0] if names else None
        lacking = [h for h, s in subnets.items() if best is None or best not in s]
        return CheckResult(
            name,
            FAIL,
            tuple(lacking),
            "no interface with one subnet on every node"
            + (f": {best} is missing or on another subnet on {_hosts_list(lacking)}" if best else ""),
        )
    shown = []
    for interface, subnet in sorted(common):
        mtus = {r.host: r.mtus.get(interface, 0) for r in reached}
        mtu, odd = majority(mtus)
        if odd:
            differ = ", ".join(f"{mtus[h]} on {h}" for h in odd[:6])
            return CheckResult(name, FAIL, tuple(odd), f"{interface} MTU {differ}; {mtu} on the others")
        shown.append(f"{interface} ({subnet}, MTU {mtu})")
    return CheckResult(name, PASS, (), "common to every node: " + ", ".join(shown))


def check_rdma(reports: list[NodeReport]) -> CheckResult:
    """Check 8, InfiniBand/RoCE: where any node has ports, every node has an Active one and no port is down."""
    name = "rdma"
    reached = _reached(reports)
    if not any(r.ib_ports for r in reached):
        return CheckResult(name, PASS, (), "no InfiniBand/RoCE port on any node (TCP only)")
    problems, hosts = [], []
    for report in reached:
        if not report.ib_ports:
            problems.append(f"{report.host} has no InfiniBand/RoCE port")
        else:
            down = [f"{p.name} {p.state}" for p in report.ib_ports if p.state != "ACTIVE"]
            if down:
                problems.append(f"{report.host}: " + ", ".join(down))
        if problems and (not hosts or hosts[-1] != report.host) and problems[-1].startswith(report.host):
            hosts.append(report.host)
    if problems:
        return CheckResult(name, FAIL, tuple(hosts), "; ".join(problems) + " (the others: every port ACTIVE)")
    ports = sum(len(r.ib_ports) for r in reached)
    return CheckResult(name, PASS, (), f"{ports} port(s) ACTIVE on {len(reached)} node(s)")


def check_time(reports: list[NodeReport], threshold: float = CLOCK_WARN_S) -> CheckResult:
    """Check 9: each node's clock within ``threshold`` seconds of the controller's, corrected for the round trip."""
    name = "time"
    offsets = {r.host: (r.clock_offset, r.clock_error or 0.0) for r in _reached(reports) if r.clock_offset is not None}
    if not offsets:
        return CheckResult(name, WARN, (), "no node reported its clock")
    odd = [h for h, (offset, error) in offsets.items() if abs(offset) - error > threshold]
    if odd:
        differ = ", ".join(
            f"{h} is {abs(offsets[h][0]):.1f} s {'ahead' if offsets[h][0] > 0 else 'behind'} (±{offsets[h][1]:.2f} s)"
            for h in odd[:6]
        )
        return CheckResult(name, WARN, tuple(odd), f"{differ}; the others within {threshold:g} s of this machine (NTP/chrony?)")
    worst = max(abs(o) for o, _ in offsets.values())
    return CheckResult(name, PASS, (), f"every clock within {worst:.2f} s of this machine")


def check_gpu_health(reports: list[NodeReport]) -> CheckResult:
    """Check 10, where nvidia-smi exists: persistence mode (warn), volatile uncorrected ECC,
    pending page retirement or row remapping, GPUs missing against PCI (fail), Xid errors (warn)."""
    name = "gpu health"
    with_smi = [r for r in _reached(reports) if r.gpu_health is not None]
    # A node whose PCI bus shows NVIDIA GPUs but has no nvidia-smi: its GPUs go unchecked (a warning, not a pass).
    blind = [r.host for r in _reached(reports) if r.gpu_health is None and r.pci_gpus]
    unchecked = (
        f"no nvidia-smi on {_hosts_list(blind)} although PCI shows NVIDIA GPUs there: install the NVIDIA driver "
        "(it brings nvidia-smi) so their health can be checked"
        if blind
        else ""
    )
    if not with_smi:
        if blind:
            return CheckResult(name, WARN, tuple(blind), unchecked)
        return CheckResult(name, PASS, (), "no NVIDIA GPU on any node (no nvidia-smi, none on PCI)")
    statuses, hosts, problems, unreadable = [], [], [], []
    for report in with_smi:
        found = []
        off = [g.bus_id for g in report.gpu_health if g.persistence is False]
        if off:
            found.append((WARN, f"persistence mode off on {len(off)} GPU(s)"))
        for gpu in report.gpu_health:
            if gpu.volatile_uncorrected:
                found.append((FAIL, f"GPU {gpu.bus_id}: {gpu.volatile_uncorrected} volatile uncorrected ECC error(s)"))
            if gpu.retired_pending:
                found.append((FAIL, f"GPU {gpu.bus_id}: page retirement pending (reset the GPU)"))
            if gpu.remapped_pending:
                found.append((FAIL, f"GPU {gpu.bus_id}: row remapping pending (reset the GPU)"))
        if report.pci_gpus > len(report.gpu_health):
            listed = len(report.gpu_health)
            found.append((FAIL, f"driver lists {listed} GPU(s), PCI shows {report.pci_gpus} (a GPU fell off the bus?)"))
        if report.xids:
            found.append((WARN, f"{len(report.xids)} Xid error(s), last: {report.xids[-1][-100:]}"))
        if report.xids is None:
            unreadable.append(report.host)
        if found:
            statuses.append(_worst([s for s, _ in found]))
            hosts.append(report.host)
            problems.append(f"{report.host}: " + "; ".join(text for _, text in found))
    note = f" (kernel log not readable on {_hosts_list(unreadable)}: Xid not checked)" if unreadable else ""
    if blind:
        statuses.append(WARN)
        hosts += blind
        problems.append(unchecked)
    if problems:
        return CheckResult(name, _worst(statuses), tuple(hosts), "; ".join(problems) + note)
    gpus = sum(len(r.gpu_health) for r in with_smi)
    return CheckResult(name, PASS, (), f"{gpus} GPU(s) on {len(with_smi)} node(s) healthy{note}")


FAST = ("reach + job user", "pairwise ssh", "software", "limits")


def verdict(results: list[CheckResult], strict: bool = False) -> tuple[str, int]:
    """The one-line verdict and the exit code (1 when a check fails, or warns under ``strict``)."""
    failing = [r.name for r in results if r.status == FAIL or (strict and r.status == WARN)]
    warning = [r.name for r in results if r.status == WARN and not strict]
    if failing:
        return f"NOT READY: {len(failing)} check(s) fail ({', '.join(failing)})" + (
            f", {len(warning)} warn ({', '.join(warning)})" if warning else ""
        ), 1
    if warning:
        return f"ready, with {len(warning)} warning(s) ({', '.join(warning)})", 0
    return f"ready: all {len(results)} checks pass", 0
