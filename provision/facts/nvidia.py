"""Parsers for ``nvidia-smi`` (GPU list, ``topo -m`` affinity) and the sysfs GPU NUMA capture."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass

from provision.errors import ParseError
from provision.facts.limits import MAX_GPUS, MAX_NVIDIA_FUNCTIONS, check_count
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
    """One ``GPUn`` row of ``nvidia-smi topo -m``: CPUs and NUMA node nearest to the GPU."""

    index: int
    cpus: tuple[int, ...]
    numa_node: int | None


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


@SOURCE_TOPO.parses
def parse_topo_matrix(text: str) -> tuple[GpuAffinity, ...]:
    """Parse ``nvidia-smi topo -m``: the ``CPU Affinity`` and ``NUMA Affinity`` columns of GPU rows.

    Older drivers have no NUMA column (then ``numa_node`` is None); values ``N/A`` read as None.
    """
    from provision.facts.cpulist import parse_cpulist

    header: list[str] | None = None
    affinities: list[GpuAffinity] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _ANSI.sub("", raw).rstrip("\n")
        cells = [cell.strip() for cell in line.split("\t")]
        if header is None:
            if "CPU Affinity" in cells:
                header = cells
            continue
        if not cells or not re.fullmatch(r"GPU[0-9]{1,9}", cells[0]):
            if line.strip().startswith("Legend"):
                break
            continue
        index = int(cells[0][3:])
        check_count(SOURCE_TOPO.name, "GPUs", len(affinities) + 1, MAX_GPUS, number)
        row = dict(zip(header, cells, strict=False))
        cpu_text = row.get("CPU Affinity", "")
        cpus = () if cpu_text in ("", "N/A") else parse_cpulist(cpu_text, SOURCE_TOPO.name, number)
        numa_text = row.get("NUMA Affinity", "")
        if numa_text in ("", "N/A"):
            numa_node = None
        elif re.fullmatch(r"[0-9]{1,9}", numa_text):
            numa_node = int(numa_text)
        else:
            raise ParseError(SOURCE_TOPO.name, f"GPU{index}: bad NUMA affinity {shown_value(numa_text)}", number)
        affinities.append(GpuAffinity(index, cpus, numa_node))
    if header is None:
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
