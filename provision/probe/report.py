"""What `provision probe` shows: a table per host, a heterogeneity summary, or JSON."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING

from provision.facts.cpulist import format_ranges
from provision.facts.model import HostFacts
from provision.facts.registry import kept_facts
from provision.probe.run import ProbeResult

if TYPE_CHECKING:
    from rich.console import Console


def gpu_summary(facts: HostFacts) -> str:
    """``4× Tesla V100 (s0:2 s1:2)``, or ``-``."""
    if not facts.gpus:
        return "-"
    names = Counter(gpu.name for gpu in facts.gpus)
    label = ", ".join(f"{count}× {name}" for name, count in names.items())
    per_socket = Counter("?" if gpu.socket is None else str(gpu.socket) for gpu in facts.gpus)
    return f"{label} (" + " ".join(f"s{s}:{n}" for s, n in sorted(per_socket.items())) + ")"


def nic_summary(facts: HostFacts) -> str:
    """RDMA ports counted by kind and rate, ``8× IB 200 Gb/sec, 1× RoCE 100 Gb/sec, 1× DOWN``, else
    ``-``: one short cell for an 8-rail node (each port's name and state are in --json and
    `topology`)."""
    counts: Counter[str] = Counter()
    for device in facts.rdma:
        for port in device.ports:
            kind = {"InfiniBand": "IB", "Ethernet": "RoCE"}.get(port.link_layer or "", "?")
            rate = (port.rate or "").split(" (")[0]
            counts[f"{kind} {rate}".strip() if port.active else (port.state or "?")] += 1
    return ", ".join(f"{count}× {label}" for label, count in counts.items()) or "-"


def gpu_nic_lines(facts: HostFacts) -> list[str]:
    """``GPU 0: mlx5_0 PIX, mlx5_1 SYS (hwloc-xml)`` for each GPU with known NIC distances."""
    by_gpu: dict[int, list] = {}
    for link in facts.gpu_nics:  # one pass: per GPU, a scan of every link would be GPUs x GPUs x NICs
        by_gpu.setdefault(link.gpu, []).append(link)
    lines = []
    for gpu in facts.gpus:
        links = by_gpu.get(gpu.index)
        if links:
            sources = sorted({link.source for link in links})
            lines.append(
                f"GPU {gpu.index}: " + ", ".join(f"{link.device} {link.distance}" for link in links) + f" ({', '.join(sources)})"
            )
    return lines


def openmpi_summary(facts: HostFacts) -> str:
    """``4.1.4`` (``+cuda`` when CUDA-aware), or ``-``."""
    mpi = facts.openmpi
    if not mpi.version:
        return "-"
    return mpi.version + (" +cuda" if mpi.cuda_aware else "")


FIXED_COLUMNS = ("arch", "S×C×T", "GPUs", "RDMA", "memory", "OpenMPI")  # then each kept fact's column


def columns() -> tuple[str, ...]:
    """The headings of a probed host's row (host name and status aside): the derived facts', then
    each kept fact's ``column`` in registry order."""
    return (*FIXED_COLUMNS, *(fact.column for fact in kept_facts()))


def row_of(facts: HostFacts) -> tuple[str, ...]:
    """The cells of a probed host's row under :func:`columns` (the table's and the summary's: one
    definition); a kept fact not captured shows ``-``."""
    memory = f"{facts.memory_mib / 1024:.0f} GiB" if facts.memory_mib else "-"
    kept = (fact.shown(facts.kept[fact.name]) if fact.name in facts.kept else "-" for fact in kept_facts())
    return (facts.arch, facts.cpu.shape(), gpu_summary(facts), nic_summary(facts), memory, openmpi_summary(facts), *kept)


def heterogeneity(results: list[ProbeResult]) -> list[str]:
    """Lines naming the hosts whose topology differs from the majority (empty when uniform)."""
    ok = [r.facts for r in results if r.facts is not None]
    if len(ok) < 2:
        return []
    counts = Counter(facts.signature() for facts in ok)
    majority, size = counts.most_common(1)[0]
    lines = []
    for facts in ok:
        signature = facts.signature()
        if signature == majority:
            continue
        differences = [
            f"{label} {mine} (majority {theirs})"
            for label, mine, theirs in zip(
                ("arch", "sockets×cores×threads", "GPUs", "GPU model"), signature, majority, strict=False
            )
            if mine != theirs
        ]
        lines.append(f"{facts.host}: " + "; ".join(differences))
    if lines:
        lines.insert(
            0, f"{len(lines)} of {len(ok)} hosts differ from the majority ({size} hosts): launchers refuse mixed clusters"
        )
    return lines


def status_of(result: ProbeResult) -> str:
    """``ok`` or ``<kind>: <message>``."""
    return "ok" if result.ok else f"{result.error_kind}: {result.error}"


def print_table(results: list[ProbeResult], console: Console) -> None:
    """A table of hosts, then notes, then the heterogeneity summary."""
    from rich.markup import escape  # rich only where a table is printed (not for --json: start-up)
    from rich.table import Table

    table = Table(
        title="provision probe",
        title_justify="left",
        caption="S×C×T: sockets × usable cores per socket × threads per core",
        caption_justify="left",
    )
    headings = columns()
    for column in ("host", *headings):
        table.add_column(column, overflow="fold")
    table.add_column("status", no_wrap=True)  # one word: the other cells fold first on a narrow terminal
    for result in results:
        facts = result.facts
        if facts is None:
            # The kind only: the whole message is one line per host under the table (print_failures).
            blank = ("",) * len(headings)
            table.add_row(escape(result.host), *blank, f"[red]{escape(result.error_kind or 'failed')}[/red]")
            continue
        table.add_row(escape(facts.host), *(escape(cell) for cell in row_of(facts)), "[green]ok[/green]")
    console.print(table)
    for result in results:
        if result.facts is not None:
            for note in result.facts.notes:
                console.print("[yellow]note[/yellow] " + escape(f"{result.host}: {note}"))
    differing = heterogeneity(results)
    if differing:
        console.print(f"[bold yellow]heterogeneous cluster:[/bold yellow] {escape(differing[0])}")
        for line in differing[1:]:
            console.print(f"  {line}", markup=False)


def failure_lines(results: list[ProbeResult]) -> list[str]:
    """One line per failed host: ``host: kind: message``."""
    return [f"{result.host}: {status_of(result)}" for result in results if not result.ok]


def print_topology(facts: HostFacts, console: Console) -> None:
    """The rank-file view of one host: each socket's cores (relative numbers) and CPUs, GPUs."""
    from rich.markup import escape

    console.print(
        f"[bold]{escape(facts.host)}[/bold] "
        + escape(f"({facts.hostname}, {facts.arch}): {facts.cpu.shape()} from {facts.cpu.source}")
    )
    for socket in facts.cpu.sockets:
        cores = socket.cores
        cpus = [cpu for core in cores for cpu in core.cpus]
        gpus = [str(gpu.index) for gpu in facts.gpus if gpu.socket == socket.index]
        console.print(
            f"  socket {socket.index}: cores 0-{len(cores) - 1} (slot={socket.index}:0-{len(cores) - 1}), "
            f"CPUs {format_ranges(cpus)}, NUMA {','.join(map(str, socket.numa_nodes)) or '-'}"
            + (f", GPUs {','.join(gpus)}" if gpus else "")
        )
    for line in gpu_nic_lines(facts):
        console.print(f"  {escape(line)}", highlight=False)


def results_json(results: list[ProbeResult]) -> str:
    """All results as one JSON document for scripts."""
    return json.dumps(
        {
            "hosts": [
                {
                    "host": r.host,
                    "status": "ok" if r.ok else r.error_kind,
                    "error": r.error,
                    "facts": r.facts.to_dict() if r.facts else None,
                }
                for r in results
            ],
            "heterogeneity": heterogeneity(results),
        },
        indent=2,
    )
