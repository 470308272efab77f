"""Linux CPU list syntax (``0-19,40-59``), as in sysfs, nvidia-smi and numactl."""

from __future__ import annotations

import re

from provision.errors import ParseError
from provision.text import shown_value

# The bound on every CPU list and CPU id read from a node: 65536 (Linux's NR_CPUS is at most 8192
# today). A node claiming `0-99999999` gets a parse error, not a 100-million-entry list.
MAX_CPUS = 1 << 16

_RANGE = re.compile(r"^([0-9]{1,9})(?:-([0-9]{1,9}))?\Z")
_NUMBER = re.compile(r"[0-9]{1,18}")


def parse_number(text: str, source: str, line: int | None = None, what: str = "number", limit: int | None = None) -> int:
    """A plain ASCII decimal (at most 18 digits, below ``limit`` if given), else :class:`ParseError`.

    ``str.isdigit`` accepts ``"²"`` and ``int`` refuses 5000-digit strings: neither may crash a probe.
    """
    if not _NUMBER.fullmatch(text):
        raise ParseError(source, f"non-numeric {what} {shown_value(text[:20])}", line)
    value = int(text)
    if limit is not None and value >= limit:
        raise ParseError(source, f"{what} {value} is out of range (limit {limit})", line)
    return value


def parse_cpulist(text: str, source: str, line: int | None = None) -> tuple[int, ...]:
    """``"0-3,8"`` -> ``(0, 1, 2, 3, 8)``; empty text gives ``()``.

    Raises :class:`ParseError` naming ``source`` on anything else, and on a list that names a
    CPU at or above :data:`MAX_CPUS` or more than :data:`MAX_CPUS` entries in all.
    """
    text = text.strip()
    if not text:
        return ()
    cpus: list[int] = []
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise ParseError(source, f"bad CPU list item {shown_value(part)}", line)
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ParseError(source, f"descending CPU range {shown_value(part)}", line)
        if last >= MAX_CPUS or len(cpus) + last - first + 1 > MAX_CPUS:
            raise ParseError(source, f"CPU list {shown_value(text[:40])} goes beyond {MAX_CPUS} CPUs", line)
        cpus.extend(range(first, last + 1))
    return tuple(cpus)


def format_ranges(numbers: list[int] | tuple[int, ...]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"`` (sorted, de-duplicated)."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = prev = None
    for number in ordered:
        if start is None:
            start = prev = number
        elif number == prev + 1:
            prev = number
        else:
            parts.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = number
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(parts)
