"""Parser for ``numactl -H`` (``numactl --hardware``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from provision.errors import ParseError
from provision.facts.bounds import MAX_NUMA_NODES, check_count
from provision.facts.registry import Fact
from provision.text import shown_value

SOURCE = Fact("numactl-H", ("numactl",), "numactl -H", "NUMA nodes and their CPUs")

_AVAILABLE = re.compile(r"^available:\s+([0-9]{1,9})\s+nodes?\s*\(([^)]*)\)\s*\Z")
_CPUS = re.compile(r"^node\s+([0-9]{1,9})\s+cpus:\s*(.*)\Z")
_SIZE = re.compile(r"^node\s+([0-9]{1,9})\s+(size|free):\s+(?:([0-9]{1,18})\s+MB|<not available>)\s*\Z")
# The distance table as numactl prints it ("node  " then "% 4d " per node; rows "% 4d: " then
# "% 4d " per node): a line of bare numbers is none of it. A copy whose long "cpus:" line was
# wrapped (a mail, a ticket) has such lines, and reading them as distances would drop CPUs.
_DISTANCE_HEADER = re.compile(r"^node(?:\s+[0-9]{1,9})+\Z")
_DISTANCE_ROW = re.compile(r"^[0-9]{1,9}:(?:\s+[0-9]{1,9})+\Z")


@dataclass(frozen=True)
class NumaNode:
    """One NUMA node: its CPUs (may be empty, e.g. GPU memory on POWER9) and memory."""

    node_id: int
    cpus: tuple[int, ...]
    size_mb: int | None


@dataclass(frozen=True)
class NumaHardware:
    """``numactl -H`` as data."""

    nodes: tuple[NumaNode, ...]

    def nodes_with_cpus(self) -> tuple[NumaNode, ...]:
        """Nodes that hold CPUs (memory-only nodes, like POWER9 GPU memory, are left out)."""
        return tuple(node for node in self.nodes if node.cpus)

    def node_of_cpu(self) -> dict[int, int]:
        """Map logical CPU -> NUMA node id."""
        return {cpu: node.node_id for node in self.nodes for cpu in node.cpus}


@SOURCE.parses
def parse_numactl_hardware(text: str) -> NumaHardware:
    """Parse ``numactl -H`` output.

    Accepts ``available: N nodes (ids)`` with ranges (``0,8,252-255``), ``node N cpus:`` lines
    (empty for memory-only nodes), sizes, and ignores ``free`` and the distance table.
    """
    from provision.facts.cpulist import MAX_CPUS, parse_cpulist, parse_number

    declared: tuple[int, ...] | None = None
    cpus: dict[int, tuple[int, ...]] = {}
    sizes: dict[int, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if match := _AVAILABLE.match(line):
            declared = parse_cpulist(match.group(2), SOURCE.name, number)
            check_count(SOURCE.name, "NUMA nodes", len(declared), MAX_NUMA_NODES, number)
            if len(declared) != int(match.group(1)):
                raise ParseError(SOURCE.name, f"says {match.group(1)} nodes but lists {len(declared)}", number)
        elif match := _CPUS.match(line):
            node = int(match.group(1))
            check_count(SOURCE.name, "NUMA nodes", len(cpus) + 1, MAX_NUMA_NODES, number)
            fields = match.group(2).split()
            cpus[node] = tuple(parse_number(field, SOURCE.name, number, "CPU", MAX_CPUS) for field in fields)
        elif match := _SIZE.match(line):
            if match.group(2) == "size" and match.group(3) is not None:  # "<not available>": numactl's fmt_mem
                sizes[int(match.group(1))] = int(match.group(3))
        elif line in ("node distances:", "No distance information available.") or _DISTANCE_HEADER.match(line):
            continue
        elif _DISTANCE_ROW.match(line):
            continue  # the table's values are not used
        elif line.startswith("No NUMA available"):
            raise ParseError(SOURCE.name, "the kernel reports no NUMA", number)
        else:
            raise ParseError(SOURCE.name, f"unexpected line {shown_value(line[:60])}", number)
    if declared is None:
        raise ParseError(SOURCE.name, "no 'available: N nodes' line")
    missing = [node for node in declared if node not in cpus]
    if missing:
        raise ParseError(SOURCE.name, f"no 'cpus:' line for node(s) {missing}")
    seen: dict[int, int] = {}
    for node in declared:
        for cpu in cpus[node]:
            if cpu in seen:
                raise ParseError(SOURCE.name, f"CPU {cpu} listed on nodes {seen[cpu]} and {node}")
            seen[cpu] = node
    return NumaHardware(tuple(NumaNode(node, cpus[node], sizes.get(node)) for node in declared))
