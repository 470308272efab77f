"""doctor's health checks of each node on its own: its clock against the controller's (9) and,
where nvidia-smi exists, its GPUs' health (10)."""

from __future__ import annotations

from provision.doctor.compare import answered, hosts_list, worst
from provision.doctor.model import FAIL, PASS, SEVERITY, WARN, CheckResult, NodeReport

CLOCK_WARN_S = 1.0


def check_time(reports: list[NodeReport], threshold: float = CLOCK_WARN_S) -> CheckResult:
    """Check 9: each node's clock within ``threshold`` seconds of the controller's, corrected for the round trip."""
    name = "time"
    offsets = {r.host: (r.clock_offset, r.clock_error or 0.0) for r in answered(reports) if r.clock_offset is not None}
    if not offsets:
        return CheckResult(name, WARN, (), "no node reported its clock")
    odd = [h for h, (offset, error) in offsets.items() if abs(offset) - error > threshold]
    if odd:
        differ = ", ".join(
            f"{h} is {abs(offsets[h][0]):.1f} s {'ahead' if offsets[h][0] > 0 else 'behind'} (±{offsets[h][1]:.2f} s)"
            for h in odd[:6]
        )
        nodes = {
            h: f"{abs(offsets[h][0]):.1f} s {'ahead' if offsets[h][0] > 0 else 'behind'} (±{offsets[h][1]:.2f} s)" for h in odd
        }
        detail = f"{differ}; the others within {threshold:g} s of this machine (NTP/chrony?)"
        return CheckResult(name, WARN, tuple(odd), detail, nodes=nodes, thresholds={"clock_offset_s": threshold})
    worst = max(abs(o) for o, _ in offsets.values())
    return CheckResult(
        name, PASS, (), f"every clock within {worst:.2f} s of this machine", thresholds={"clock_offset_s": threshold}
    )


def check_gpu_health(reports: list[NodeReport]) -> CheckResult:
    """Check 10, where nvidia-smi exists: persistence mode (warn), volatile uncorrected ECC,
    pending page retirement or row remapping, GPUs missing against PCI (fail), Xid errors (warn)."""
    name = "gpu health"
    with_smi = [r for r in answered(reports) if r.gpu_health is not None]
    # A node whose PCI bus shows NVIDIA GPUs but has no nvidia-smi: its GPUs go unchecked (a warning, not a pass).
    blind = [r.host for r in answered(reports) if r.gpu_health is None and r.pci_gpus]
    unchecked = (
        f"no nvidia-smi on {hosts_list(blind)} although PCI shows NVIDIA GPUs there: install the NVIDIA driver "
        "(it brings nvidia-smi) so their health can be checked"
        if blind
        else ""
    )
    if not with_smi:
        if blind:
            return CheckResult(
                name, WARN, tuple(blind), unchecked, nodes=dict.fromkeys(blind, "no nvidia-smi, NVIDIA GPUs on PCI")
            )
        return CheckResult(name, PASS, (), "no NVIDIA GPU on any node (no nvidia-smi, none on PCI)")
    statuses, problems, unreadable = [], [], []
    nodes: dict[str, str] = {}
    node_status: dict[str, str] = {}
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
            statuses.append(worst([s for s, _ in found]))
            node_status[report.host] = statuses[-1]
            nodes[report.host] = "; ".join(text for _, text in sorted(found, key=lambda f: -SEVERITY[f[0]]))
            problems.append(f"{report.host}: " + "; ".join(text for _, text in found))
    note = f" (kernel log not readable on {hosts_list(unreadable)}: Xid not checked)" if unreadable else ""
    if blind:
        statuses.append(WARN)
        nodes.update(dict.fromkeys(blind, "no nvidia-smi, NVIDIA GPUs on PCI"))
        node_status.update(dict.fromkeys(blind, WARN))
        problems.append(unchecked)
    if problems:
        return CheckResult(name, worst(statuses), tuple(nodes), "; ".join(problems) + note, nodes=nodes, node_status=node_status)
    gpus = sum(len(r.gpu_health) for r in with_smi)
    return CheckResult(name, PASS, (), f"{gpus} GPU(s) on {len(with_smi)} node(s) healthy{note}")
