"""Parsers for ``nvidia-smi`` (GPU list, ``topo -m`` affinity) and the sysfs GPU NUMA capture."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass

from provision.errors import ParseError
from provision.facts.bounds import MAX_GPUS, MAX_NUMA_NODES, MAX_NVIDIA_FUNCTIONS, check_count
from provision.facts.registry import Fact
from provision.text import shown_value

SOURCE_QUERY = Fact(
    "nvidia-smi-query",
    ("nvidia-smi",),
    "nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total --format=csv,noheader",
    "GPUs",
)
SOURCE_TOPO = Fact("nvidia-smi-topo", ("nvidia-smi",), "nvidia-smi topo -m", "GPU to CPU/NUMA affinity")
SOURCE_SYSFS = Fact(
    "sysfs-gpu",
    (),
    "for d in /sys/bus/pci/devices/*; do "
    'vendor=; read -r vendor <"$d/vendor" 2>/dev/null; [ "$vendor" = 0x10de ] || continue; '
    'read -r class <"$d/class"; case "$class" in 0x0300*|0x0302*) ;; *) continue;; esac; '
    'node=-1; read -r node <"$d/numa_node" 2>/dev/null; '
    'echo "${d##*/} $node"; '
    "done",
    "fallback GPU NUMA node from sysfs",
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # topo -m underlines its header on newer drivers
_BUS = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\Z")
_MIB = re.compile(r"^([0-9]{1,18})\s*MiB\Z")


@dataclass(frozen=True)
class GpuRow:
    """One line of ``nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total``."""

    index: int
    name: str
    bus_id: str
    memory_mib: int | None


@dataclass(frozen=True)
class GpuAffinity:
    """One ``GPUn`` row of ``nvidia-smi topo -m``: the CPUs and NUMA nodes nearest to the GPU.

    ``numa_nodes`` is the whole NUMA Affinity list. Drivers before Grace print one node; on Grace
    machines (GH200, GB200) current drivers list the Grace's node and the GPU-memory nodes near it
    (``0,3-9,11-17``): which of them holds CPUs only ``numactl -H`` or ``lscpu`` can tell.
    ``numa_node`` is the one node when exactly one is listed, else None. ``gpu_numa_id`` is the
    GPU NUMA ID column: the memory-only node of the GPU's own memory (Grace), None for ``N/A``.
    """

    index: int
    cpus: tuple[int, ...]
    numa_node: int | None
    numa_nodes: tuple[int, ...] = ()
    gpu_numa_id: int | None = None


def normalise_bus_id(text: str, source: str, line: int | None = None) -> str:
    """``00000002:01:00.0`` or ``0002:01:00.0`` -> ``0002:01:00.0`` (lower case, 4-digit domain)."""
    match = _BUS.match(text.strip())
    if not match:
        raise ParseError(source, f"bad PCI bus id {shown_value(text.strip())}", line)
    domain = int(match.group(1) or "0", 16)
    return f"{domain:04x}:{match.group(2).lower()}:{match.group(3).lower()}.{match.group(4)}"


@SOURCE_QUERY.parses
def parse_gpu_query(text: str) -> tuple[GpuRow, ...]:
    """Parse the CSV (no header) of ``nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total``."""
    rows: list[GpuRow] = []
    lines = [line for line in text.splitlines()]
    for number, fields in enumerate(csv.reader(lines, skipinitialspace=True), start=1):
        if not fields or not "".join(fields).strip():
            continue
        if len(fields) != 4:
            raise ParseError(
                SOURCE_QUERY.name, f"expected 4 columns index,name,pci.bus_id,memory.total, got {len(fields)}", number
            )
        index, name, bus, memory = (field.strip() for field in fields)
        if not re.fullmatch(r"[0-9]{1,9}", index):
            raise ParseError(SOURCE_QUERY.name, f"GPU index {shown_value(index[:20])} is not a number", number)
        memory_match = _MIB.match(memory)
        check_count(SOURCE_QUERY.name, "GPUs", len(rows) + 1, MAX_GPUS, number)
        rows.append(
            GpuRow(
                int(index),
                name,
                normalise_bus_id(bus, SOURCE_QUERY.name, number),
                int(memory_match.group(1)) if memory_match else None,
            )
        )
    return tuple(rows)


_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_NONE = ("", "N/A")


def _affinity_cells(line: str, devices: int, columns: tuple[str, ...], index: int, number: int) -> dict[str, str]:
    """{affinity column: cell} of one GPU row, the ``devices`` matrix cells after its label skipped.

    nvidia-smi separates cells with tabs and puts one more before the GPU NUMA ID (``0``, two tabs, ``2``);
    an empty CPU Affinity (a cpuset that holds none of the GPU's CPUs) is an empty cell. A copy
    whose tabs became spaces (a README, a ticket) keeps no empty cell: it is read only when every
    affinity column has its value, and refused otherwise (which cell is missing cannot be told).
    """
    if "\t" in line:
        cells = [cell.strip() for cell in line.split("\t")]
        rest = cells[1 + devices :]
        if len(cells) < 1 + devices + min(len(columns), 1):
            raise ParseError(SOURCE_TOPO.name, f"GPU{index} row has {len(cells) - 1} cells, fewer than its columns", number)
        positional = dict(zip(columns[:2], rest[:2], strict=False))
        if len(columns) > 2:
            tail = [cell for cell in rest[2:] if cell]
            if len(tail) > 1:
                raise ParseError(SOURCE_TOPO.name, f"GPU{index}: {len(tail)} cells after the NUMA Affinity, one expected", number)
            positional[columns[2]] = tail[0] if tail else ""
        return positional
    cells = line.split()
    rest = cells[1 + devices :]
    if len(rest) != len(columns):
        raise ParseError(
            SOURCE_TOPO.name,
            f"GPU{index} row has {len(rest)} affinity cells for {len(columns)} columns "
            "(a copy whose tabs became spaces loses empty cells)",
            number,
        )
    return dict(zip(columns, rest, strict=True))


def _node_list(text: str, what: str, index: int, number: int) -> tuple[int, ...]:
    """A NUMA node list (``0``, ``0,3-9,11-17``), each node below Linux's ceiling."""
    from provision.facts.cpulist import parse_cpulist

    if text in _NONE:
        return ()
    try:
        nodes = parse_cpulist(text, SOURCE_TOPO.name, number)
    except ParseError:
        raise ParseError(SOURCE_TOPO.name, f"GPU{index}: bad {what} {shown_value(text[:40])}", number) from None
    check_count(SOURCE_TOPO.name, f"NUMA nodes in GPU{index}'s {what}", len(nodes), MAX_NUMA_NODES, number)
    if nodes and nodes[-1] >= MAX_NUMA_NODES:
        raise ParseError(SOURCE_TOPO.name, f"GPU{index}: {what} names node {nodes[-1]}, over Linux's {MAX_NUMA_NODES}", number)
    return nodes


@SOURCE_TOPO.parses
def parse_topo_matrix(text: str) -> tuple[GpuAffinity, ...]:
    """Parse ``nvidia-smi topo -m``: the affinity columns of its GPU rows.

    Older drivers have no NUMA column (then ``numa_node`` is None); values ``N/A`` read as None.
    A GPU row whose affinity cells cannot be read raises :class:`ParseError` naming the row.

    >>> rows = parse_topo_matrix("\\tGPU0\\tCPU Affinity\\tNUMA Affinity\\tGPU NUMA ID\\n"
    ...                          "GPU0\\t X \\t0-71\\t0,2-9\\t\\t2\\n")
    >>> rows[0].numa_node, rows[0].numa_nodes, rows[0].gpu_numa_id
    (None, (0, 2, 3, 4, 5, 6, 7, 8, 9), 2)
    """
    from provision.facts.cpulist import parse_cpulist

    columns: tuple[str, ...] | None = None
    devices = 0
    affinities: list[GpuAffinity] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _ANSI.sub("", raw)
        if columns is None:
            if "CPU Affinity" in line:
                columns = tuple(sorted((name for name in _AFFINITY_COLUMNS if name in line), key=line.index))
                for name in columns:
                    line = line.replace(name, "")
                devices = len(line.split())
                if not columns or columns[0] != "CPU Affinity":
                    raise ParseError(SOURCE_TOPO.name, "the affinity columns do not start with 'CPU Affinity'", number)
            continue
        label = line.split(None, 1)[0] if line.strip() else ""
        if not re.fullmatch(r"GPU[0-9]{1,9}", label):
            if line.strip().startswith("Legend"):
                break
            continue
        index = int(label[3:])
        check_count(SOURCE_TOPO.name, "GPUs", len(affinities) + 1, MAX_GPUS, number)
        row = _affinity_cells(line, devices, columns, index, number)
        cpu_text = row.get("CPU Affinity", "")
        cpus = () if cpu_text in _NONE else parse_cpulist(cpu_text, SOURCE_TOPO.name, number)
        numa_nodes = _node_list(row.get("NUMA Affinity", ""), "NUMA affinity", index, number)
        memory = _node_list(row.get("GPU NUMA ID", ""), "GPU NUMA ID", index, number)
        if len(memory) > 1:
            raise ParseError(SOURCE_TOPO.name, f"GPU{index}: GPU NUMA ID {shown_value(row['GPU NUMA ID'])} is not a node", number)
        affinities.append(
            GpuAffinity(
                index,
                cpus,
                numa_nodes[0] if len(numa_nodes) == 1 else None,
                numa_nodes,
                memory[0] if memory else None,
            )
        )
    if columns is None:
        raise ParseError(SOURCE_TOPO.name, "no header with a 'CPU Affinity' column")
    return tuple(affinities)


@SOURCE_SYSFS.parses
def parse_sysfs_gpu(text: str) -> dict[str, int | None]:
    """Parse ``<pci address> <numa_node>`` lines (from sysfs); -1 (unknown) reads as None."""
    nodes: dict[str, int | None] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        fields = raw.split()
        if len(fields) != 2 or not re.fullmatch(r"-?[0-9]{1,9}", fields[1]):
            raise ParseError(
                SOURCE_SYSFS.name, f"expected '<pci address> <numa node>', got {shown_value(raw.strip()[:60])}", number
            )
        node = int(fields[1])
        check_count(SOURCE_SYSFS.name, "NVIDIA PCI functions", len(nodes) + 1, MAX_NVIDIA_FUNCTIONS, number)
        nodes[normalise_bus_id(fields[0], SOURCE_SYSFS.name, number)] = node if node >= 0 else None
    return nodes
