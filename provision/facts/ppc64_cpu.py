"""Parser for ``ppc64_cpu --info`` (IBM POWER): cores and which hardware threads are online."""

from __future__ import annotations

import re
from dataclasses import dataclass

from provision.errors import ParseError
from provision.facts.registry import Fact
from provision.text import shown_value

SOURCE = Fact("ppc64_cpu-info", ("ppc64_cpu",), "ppc64_cpu --info", "POWER cores and online threads")

# Real output pads (`Core %3d:` then `%4d%c ` per thread); copies in documents often lost
# the padding. Both read the same with this pattern.
_CORE = re.compile(r"^Core\s+([0-9]{1,9})\s*:\s*(.*)\Z")
_THREAD = re.compile(r"^([0-9]{1,9})(\*?)\Z")


@dataclass(frozen=True)
class PowerCore:
    """One physical core: every thread slot, and those that are online (``*``)."""

    core_id: int
    threads: tuple[int, ...]
    online: tuple[int, ...]


@SOURCE.parses
def parse_ppc64_cpu_info(text: str) -> tuple[PowerCore, ...]:
    """Parse ``ppc64_cpu --info``; a core whose threads are all offline has ``online == ()``."""
    cores: list[PowerCore] = []
    seen_ids: set[int] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        match = _CORE.match(line)
        if not match:
            raise ParseError(SOURCE.name, f"expected 'Core N: T* T* ...', got {shown_value(line[:60])}", number)
        core_id = int(match.group(1))
        if core_id in seen_ids:
            raise ParseError(SOURCE.name, f"core {core_id} listed twice", number)
        seen_ids.add(core_id)
        threads: list[int] = []
        online: list[int] = []
        for token in match.group(2).split():
            thread = _THREAD.match(token)
            if not thread:
                raise ParseError(SOURCE.name, f"core {core_id}: bad thread {shown_value(token)}", number)
            threads.append(int(thread.group(1)))
            if thread.group(2):
                online.append(int(thread.group(1)))
        if not threads:
            raise ParseError(SOURCE.name, f"core {core_id} lists no threads", number)
        cores.append(PowerCore(core_id, tuple(threads), tuple(online)))
    if not cores:
        raise ParseError(SOURCE.name, "no 'Core N:' lines")
    return tuple(cores)
