"""Parser for nccl-tests' report (``all_reduce_perf`` and its siblings).

The report ends with ``# Out of bounds values : N OK|FAILED`` and ``# Avg bus bandwidth : X``
(GB/s, the mean of the rows' bus bandwidths); each row is ``size count type redop root time algbw
busbw #wrong`` for out-of-place, then the same four figures in place. The figure doctor judges is
the bus bandwidth of the largest size (the link's, not the latency-bound small sizes'), the
out-of-place and in-place mean; a FAILED validation is an error whatever the bandwidth (see
NVIDIA/nccl-tests issue #7, "Out of bounds values : 248 FAILED"). Lines prefixed by mpirun's
``--tag-output`` (``[1,0]<stdout>:``) are read too.

>>> row = "  1048576  262144  float  sum  -1  100.0  10.49  18.35  0  99.0  10.59  18.53  0"
>>> parse_all_reduce(row + "\\n# Out of bounds values : 0 OK\\n# Avg bus bandwidth    : 18.44\\n").busbw_gbytes
18.44
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from provision.errors import ParseError
from provision.text import shown_value

MAX_BYTES = 1 << 20
SOURCE = "all_reduce_perf"
_TAG = re.compile(r"^\[\d{1,6},\d{1,6}\]<stdout>:")
_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d{1,12})\s+(OK|FAILED)")
_AVERAGE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(\d{1,9}(?:\.\d{1,9})?)")
_ROW = re.compile(r"\s*(\d{1,15})\s+(\d{1,15})\s+\w{1,12}\s+\w{1,8}\s+-?\d{1,6}\s+(.*)")


@dataclass(frozen=True)
class AllReduce:
    """The report: average bus bandwidth (GB/s, nccl-tests' own), the largest size tested and its
    bus bandwidth, and how many values were wrong."""

    busbw_gbytes: float
    largest_bytes: int
    largest_busbw_gbytes: float
    wrong: int


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ParseError(SOURCE, f"{shown_value(text[:20])} is not a figure") from None
    if not math.isfinite(value) or value < 0:
        raise ParseError(SOURCE, f"{shown_value(text[:20])} is not a figure")
    return value


def parse_all_reduce(text: str) -> AllReduce:
    """The report; :class:`ParseError` when it is missing its summary (the run died) or a row does not read."""
    if len(text) > MAX_BYTES:
        raise ParseError(SOURCE, f"over {MAX_BYTES} bytes")
    average = bounds = None
    largest = (0, 0.0)
    for number, raw in enumerate(text.splitlines(), 1):
        line = _TAG.sub("", raw)
        if match := _BOUNDS.search(line):
            bounds = (int(match.group(1)), match.group(2))
        elif match := _AVERAGE.search(line):
            average = _float(match.group(1))
        elif not line.lstrip().startswith("#") and (match := _ROW.fullmatch(line)):
            figures = match.group(3).split()
            if len(figures) < 8:
                raise ParseError(SOURCE, f"a row with {len(figures)} figures after the root, not 8", number)
            size = int(match.group(1))
            busbw = (_float(figures[2]) + _float(figures[6])) / 2
            if size >= largest[0]:
                largest = (size, busbw)
    if average is None or bounds is None:
        raise ParseError(SOURCE, "no '# Avg bus bandwidth' and '# Out of bounds values' summary (the run did not finish)")
    return AllReduce(average, largest[0], largest[1], bounds[0])
