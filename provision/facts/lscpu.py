"""Parsers for ``lscpu`` (key: value) and ``lscpu -p=CPU,CORE,SOCKET,NODE`` (CSV)."""

from __future__ import annotations

from dataclasses import dataclass

from provision.errors import ParseError
from provision.facts.cpulist import MAX_CPUS, parse_number
from provision.facts.registry import Fact
from provision.text import shown_value

SOURCE = Fact("lscpu", ("lscpu",), "lscpu", "CPU summary")
SOURCE_P = Fact("lscpu-p", ("lscpu",), "lscpu -p=CPU,CORE,SOCKET,NODE", "online CPUs with core, socket, node")


@dataclass(frozen=True)
class CpuRow:
    """One online logical CPU and where it sits. ``node`` is None without NUMA."""

    cpu: int
    core: int
    socket: int
    node: int | None


@SOURCE.parses
def parse_lscpu(text: str) -> dict[str, str]:
    """``lscpu`` -> {field: value}, e.g. ``{"Architecture": "x86_64", "Socket(s)": "2"}``."""
    fields: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        key, sep, value = raw.partition(":")
        if not sep or not key.strip():
            raise ParseError(SOURCE.name, f"expected 'Field: value', got {shown_value(raw.strip()[:60])}", number)
        fields.setdefault(key.strip(), value.strip())
    if not fields:
        raise ParseError(SOURCE.name, "empty output")
    return fields


@SOURCE_P.parses
def parse_lscpu_parsable(text: str, source: str = SOURCE_P.name) -> tuple[CpuRow, ...]:
    """Parse ``lscpu -p=CPU,CORE,SOCKET,NODE`` (or plain ``lscpu -p``, whose cache columns are ignored).

    The node column is empty on machines without NUMA. Only online CPUs are listed
    (lscpu's default for ``-p``).
    """
    rows: list[CpuRow] = []
    seen: set[int] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 4:
            raise ParseError(source, f"expected columns CPU,CORE,SOCKET,NODE, got {shown_value(line[:60])}", number)
        cpu, core, socket, node = (  # plain `lscpu -p` adds cache columns after these
            parse_number(fields[0], source, number, "CPU", MAX_CPUS),
            parse_number(fields[1], source, number, "core"),
            parse_number(fields[2], source, number, "socket"),
            parse_number(fields[3], source, number, "node") if fields[3] else None,
        )
        if cpu in seen:
            raise ParseError(source, f"CPU {cpu} listed twice", number)
        seen.add(cpu)
        rows.append(CpuRow(cpu, core, socket, node))
    if not rows:
        raise ParseError(source, "no CPU rows")
    return tuple(rows)
