"""Parsers for ``nvidia-smi`` (GPU list, ``topo -m`` affinity) and the sysfs GPU NUMA capture."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass

from provision.errors import ParseError

SOURCE_QUERY = "nvidia-smi-query"
SOURCE_TOPO = "nvidia-smi-topo"
SOURCE_SYSFS = "sysfs-gpu"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # topo -m underlines its header on newer drivers
_BUS = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_MIB = re.compile(r"^(\d+)\s*MiB$")


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
        raise ParseError(source, f"bad PCI bus id {text.strip()!r}", line)
    domain = int(match.group(1) or "0", 16)
    return f"{domain:04x}:{match.group(2).lower()}:{match.group(3).lower()}.{match.group(4)}"


def parse_gpu_query(text: str) -> tuple[GpuRow, ...]:
    """Parse the CSV (no header) of ``nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total``."""
    rows: list[GpuRow] = []
    lines = [line for line in text.splitlines()]
    for number, fields in enumerate(csv.reader(lines, skipinitialspace=True), start=1):
        if not fields or not "".join(fields).strip():
            continue
        if len(fields) != 4:
            raise ParseError(SOURCE_QUERY, f"expected 4 columns index,name,pci.bus_id,memory.total, got {len(fields)}", number)
        index, name, bus, memory = (field.strip() for field in fields)
        if not index.isdigit():
            raise ParseError(SOURCE_QUERY, f"GPU index {index!r} is not a number", number)
        memory_match = _MIB.match(memory)
        rows.append(
            GpuRow(
                int(index),
                name,
                normalise_bus_id(bus, SOURCE_QUERY, number),
                int(memory_match.group(1)) if memory_match else None,
            )
        )
    return tuple(rows)


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
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            if line.strip().startswith("Legend"):
                break
            continue
        index = int(cells[0][3:])
        row = dict(zip(header, cells))
        cpu_text = row.get("CPU Affinity", "")
        cpus = () if cpu_text in ("", "N/A") else parse_cpulist(cpu_text, SOURCE_TOPO, number)
        numa_text = row.get("NUMA Affinity", "")
        if numa_text in ("", "N/A"):
            numa_node = None
        elif numa_text.isdigit():
            numa_node = int(numa_text)
        else:
            raise ParseError(SOURCE_TOPO, f"GPU{index}: bad NUMA affinity {numa_text!r}", number)
        affinities.append(GpuAffinity(index, cpus, numa_node))
    if header is None:
        raise ParseError(SOURCE_TOPO, "no header with a 'CPU Affinity' column")
    return tuple(affinities)


def parse_sysfs_gpu(text: str) -> dict[str, int | None]:
    """Parse ``<pci address> <numa_node>`` lines (from sysfs); -1 (unknown) reads as None."""
    nodes: dict[str, int | None] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        fields = raw.split()
        if len(fields) != 2 or not re.fullmatch(r"-?\d+", fields[1]):
            raise ParseError(SOURCE_SYSFS, f"expected '<pci address> <numa node>', got {raw.strip()[:60]!r}", number)
        node = int(fields[1])
        nodes[normalise_bus_id(fields[0], SOURCE_SYSFS, number)] = node if node >= 0 else None
    return nodes
