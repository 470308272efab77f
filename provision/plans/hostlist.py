"""Slurm hostlists: fold host names into ``node[01-16,20],gpu7`` and expand them back.

The syntax is Slurm's one-dimensional hostlist (``scontrol show hostlist`` / ``show hostnames``):
a name is a prefix and an optional numeric suffix (its trailing digits); names with the same
prefix share one bracket of comma-separated ranges ``lo-hi``, each range printed with the width
of its first suffix (``01-16`` expands to ``01 02 ... 16``: zero padding is kept, and a suffix
fits a range only when printing its number at the range's width gives it back, so ``node1``,
``node01`` and ``node001`` stay three different hosts). A lone host is written bare (``gpu7``,
not ``gpu[7]``). tests/test_hostlist_slurm.py checks both directions against the real scontrol.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from provision.errors import ProvisionError
from provision.text import shown_value

MAX_SUFFIX_DIGITS = 9  # longer digit runs are left unfolded (Slurm keeps suffixes in an unsigned long)
_NAME = re.compile(rf"^(.*?)([0-9]{{1,{MAX_SUFFIX_DIGITS}}})?\Z", re.DOTALL)
_SPECIAL = re.compile(r"[\[\],\s]")
# No bracket inside brackets: a "[" without its "]" ends the try there (linear, never a rescan to the end).
_PART = re.compile(r"([^\[\],]*)(?:\[([^\[\]]*)\])?(?:,|\Z)")
_RANGE = re.compile(rf"^([0-9]{{1,{MAX_SUFFIX_DIGITS}}})(?:-([0-9]{{1,{MAX_SUFFIX_DIGITS}}}))?\Z")


class HostlistError(ProvisionError):
    """A name that cannot go into a hostlist, or a hostlist that cannot be read."""


@dataclass(frozen=True)
class _Range:
    prefix: str
    low: int
    high: int
    width: int  # digits of the first suffix; 0 for a name without one

    def text(self) -> str:
        if self.low == self.high:
            return f"{self.low:0{self.width}d}"
        return f"{self.low:0{self.width}d}-{self.high:0{self.width}d}"


def _split(name: str) -> tuple[str, str]:
    match = _NAME.match(name)
    prefix, digits = match.group(1), match.group(2) or ""
    if not prefix and digits:  # an all-digit name: Slurm reads it as a prefix-less range; keep it whole
        return name, ""
    return prefix, digits


def _sort_key(name: str) -> tuple[str, int, int]:
    prefix, digits = _split(name)
    return (prefix, int(digits) if digits else -1, len(digits))


def sorted_hosts(names: list[str] | tuple[str, ...]) -> list[str]:
    """Unique names in hostlist order: by prefix, then by number (``node2`` before ``node10``)."""
    return sorted(set(names), key=_sort_key)


def fold(names: list[str] | tuple[str, ...]) -> str:
    """``["node01", "node02", "node03", "node07", "gpu8"]`` -> ``gpu8,node[01-03,07]``.

    Names are deduplicated and sorted (:func:`sorted_hosts`). Raises :class:`HostlistError`
    naming a host whose name holds ``[``, ``]``, ``,`` or white space (no hostlist can hold it).
    """
    ranges: list[_Range] = []
    for name in sorted_hosts(names):
        if not name or _SPECIAL.search(name):
            raise HostlistError(f"host {shown_value(name)}: a Slurm hostlist cannot hold '[', ']', ',' or white space")
        prefix, digits = _split(name)
        last = ranges[-1] if ranges else None
        if digits and last is not None and last.prefix == prefix and last.width:
            value = int(digits)
            if value == last.high + 1 and f"{value:0{last.width}d}" == digits:
                ranges[-1] = _Range(prefix, last.low, value, last.width)
                continue
        if digits:
            ranges.append(_Range(prefix, int(digits), int(digits), len(digits)))
        else:
            ranges.append(_Range(name, 0, 0, 0))
    parts: list[str] = []
    index = 0
    while index < len(ranges):
        same = [ranges[index]]
        while index + len(same) < len(ranges) and ranges[index + len(same)].prefix == same[0].prefix and same[0].width:
            same.append(ranges[index + len(same)])
        index += len(same)
        head = same[0]
        if not head.width:
            parts.append(head.prefix)
        elif len(same) == 1 and head.low == head.high:
            parts.append(f"{head.prefix}{head.text()}")
        else:
            parts.append(f"{head.prefix}[{','.join(r.text() for r in same)}]")
    return ",".join(parts)


def folded(names: list[str] | tuple[str, ...]) -> str:
    """:func:`fold`, or the names joined by commas when one cannot be folded (a name with ``[``,
    ``]``, ``,`` or white space): for a line that stands for many hosts.

    >>> folded(["n1", "n2", "n3"]), folded(["a[1]", "b"])
    ('n[1-3]', 'a[1],b')
    """
    try:
        return fold(names)
    except HostlistError:
        return ",".join(names)


def expand(hostlist: str) -> list[str]:
    """``node[01-03,07],gpu8`` -> ``["node01", "node02", "node03", "node07", "gpu8"]`` (in order).

    Raises :class:`HostlistError` on text that is not a one-dimensional Slurm hostlist.
    """
    names: list[str] = []
    text = hostlist.strip()
    position = 0
    while position < len(text):
        match = _PART.match(text, position)
        if match is None or match.end() == position:
            raise HostlistError(f"hostlist {shown_value(hostlist)}: cannot read it at character {position + 1}")
        prefix, inside = match.group(1), match.group(2)
        if inside is None:
            if not prefix:
                raise HostlistError(f"hostlist {shown_value(hostlist)}: empty name at character {position + 1}")
            names.append(prefix)
        else:
            for item in inside.split(","):
                bounds = _RANGE.match(item.strip())
                if bounds is None:
                    raise HostlistError(f"hostlist {shown_value(hostlist)}: {shown_value(item)} is not a number or a range lo-hi")
                low_text, high_text = bounds.group(1), bounds.group(2) or bounds.group(1)
                low, high = int(low_text), int(high_text)
                if high < low:
                    raise HostlistError(f"hostlist {shown_value(hostlist)}: range {shown_value(item)} runs backwards")
                names.extend(f"{prefix}{value:0{len(low_text)}d}" for value in range(low, high + 1))
        position = match.end()
    return names
