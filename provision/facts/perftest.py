"""Parsers for perftest's reports: ``ib_write_bw`` (bandwidth) and ``ib_write_lat`` (latency).

perftest prints a header block, then one table: ``#bytes #iterations BW peak[MB/sec] BW
average[MB/sec] MsgRate[Mpps]`` for the bandwidth tests, ``#bytes #iterations t_min[usec]
t_max[usec] t_typical[usec] ...`` for the latency tests (the same table for ib_read_lat and
ib_send_lat). MB/sec is 2^20 bytes a second and Gb/sec 10^9 bits (``--report_gbits``): perftest's
``print_report_bw`` divides by ``format_factor = (report_fmt == MBS) ? 0x100000 : 125000000``
(linux-rdma/perftest, src/perftest_parameters.c). Warnings may sit between the header and the
row (``Conflicting CPU frequency values detected``); they are skipped. Hostile input: size-capped,
every figure checked; the last row is taken (``-a`` prints one per size, largest last).

>>> parse_write_bw(" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\\n 65536 5000 97.1 96.5 0.18\\n")
96.5
"""

from __future__ import annotations

import math
import re

from provision.errors import ParseError
from provision.text import shown_value

MAX_BYTES = 1 << 18
_BW_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(MB/sec|Gb/sec)\]\s+BW average\[(MB/sec|Gb/sec)\]")
_LAT_HEADER = re.compile(r"#bytes\s+#iterations\s+t_min\[usec\]\s+t_max\[usec\]\s+t_typical\[usec\]")
_NUMBER = re.compile(r"\d{1,12}(?:\.\d{1,9})?")


def _rows(text: str, header: re.Pattern, source: str) -> tuple[re.Match, list[list[str]]]:
    if len(text) > MAX_BYTES:
        raise ParseError(source, f"over {MAX_BYTES} bytes")
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if header.search(line)), None)
    if at is None:
        raise ParseError(source, "no result table (the test did not run: see its output)")
    rows = []
    for line in lines[at + 1 :]:
        fields = line.split()
        if fields and all(_NUMBER.fullmatch(f) for f in fields):
            rows.append(fields)
        elif line.startswith("---") and rows:
            break
    if not rows:
        raise ParseError(source, "a result table without a row", at + 1)
    return header.search(lines[at]), rows


def _figure(text: str, source: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ParseError(source, f"{shown_value(text[:20])} is not a figure")
    return value


def parse_write_bw(text: str) -> float:
    """The average bandwidth of the last row, in Gbit/s."""
    match, rows = _rows(text, _BW_HEADER, "ib_write_bw")
    fields = rows[-1]
    if len(fields) < 4:
        raise ParseError("ib_write_bw", f"a row of {len(fields)} fields, not 5")
    average = _figure(fields[3], "ib_write_bw")
    return average * 8 * 0x100000 / 1e9 if match.group(2) == "MB/sec" else average


def parse_write_lat(text: str) -> float:
    """The typical (median) latency of the last row, in microseconds."""
    _, rows = _rows(text, _LAT_HEADER, "ib_write_lat")
    fields = rows[-1]
    if len(fields) < 5:
        raise ParseError("ib_write_lat", f"a row of {len(fields)} fields, not at least 5")
    return _figure(fields[4], "ib_write_lat")
