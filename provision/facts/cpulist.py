"""Linux CPU list syntax (``0-19,40-59``), as in sysfs, nvidia-smi and numactl."""

from __future__ import annotations

import re

from provision.errors import ParseError

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def parse_cpulist(text: str, source: str, line: int | None = None) -> tuple[int, ...]:
    """``"0-3,8"`` -> ``(0, 1, 2, 3, 8)``; empty text gives ``()``.

    Raises :class:`ParseError` naming ``source`` on anything else.
    """
    text = text.strip()
    if not text:
        return ()
    cpus: list[int] = []
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise ParseError(source, f"bad CPU list item {part!r}", line)
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ParseError(source, f"descending CPU range {part!r}", line)
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
