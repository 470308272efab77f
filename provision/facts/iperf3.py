"""Parser for ``iperf3 --json`` client output (hostile input: size-capped, every field checked).

The figures are the receivers' (what arrived, not what was queued): ``end.sum_received`` for the
client's direction and, with ``--bidir`` (iperf3 3.7+), ``end.sum_received_bidir_reverse`` for
the server's. The latency figure is the lowest ``mean_rtt`` of the streams' senders: the kernel's
smoothed TCP round trip (``tcp_info``), in microseconds, taken during the test, so it includes
the queueing the test itself causes on a slow direction; the other direction's is the cleaner one.
A run that failed prints ``{"error": "..."}`` (``unable to connect to server: Connection
refused``), which is returned as the error, never raised.

>>> parse_iperf3('{"start": {}, "end": {}, "error": "unable to connect to server: Connection refused"}').error
'unable to connect to server: Connection refused'
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from provision.errors import ParseError

MAX_BYTES = 1 << 20  # a 3-second --json run is ~6 KB; more is not iperf3's output
SOURCE = "iperf3"
_COOKIE = re.compile(r"[A-Za-z0-9]{8,64}")  # iperf3's: 36 of a-z2-7 (make_cookie)


@dataclass(frozen=True)
class Iperf3Result:
    """One client run: Gbit/s each way (``reverse_gbps`` None without --bidir), the lowest sender
    round trip in microseconds (None when the kernel gave none), or the error iperf3 reported."""

    forward_gbps: float | None = None
    reverse_gbps: float | None = None
    rtt_us: float | None = None
    version: str = ""
    error: str = ""
    cookie: str = ""  # start.cookie: the test's id, the same in the client's and the server's report


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ParseError(SOURCE, f"{what} is not a non-negative number")
    return float(value)


def _bits(end: dict, key: str) -> float | None:
    block = end.get(key)
    if block is None:
        return None
    if not isinstance(block, dict):
        raise ParseError(SOURCE, f"end.{key} is not an object")
    return _number(block.get("bits_per_second"), f"end.{key}.bits_per_second") / 1e9


def _lowest_rtt(end: dict) -> float | None:
    streams = end.get("streams", [])
    if not isinstance(streams, list):
        raise ParseError(SOURCE, "end.streams is not a list")
    rtts = []
    for stream in streams[:256]:
        sender = stream.get("sender") if isinstance(stream, dict) else None
        if isinstance(sender, dict) and "mean_rtt" in sender:
            rtt = _number(sender["mean_rtt"], "a stream's mean_rtt")
            if rtt > 0:
                rtts.append(rtt)
    return min(rtts) if rtts else None


def parse_iperf3(text: str) -> Iperf3Result:
    """The client's ``--json`` output; :class:`ParseError` when it is not iperf3's (too long, not
    JSON, a figure missing or not a number). A reported failure is a result with ``error``."""
    if len(text) > MAX_BYTES:
        raise ParseError(SOURCE, f"over {MAX_BYTES} bytes")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ParseError(SOURCE, f"not JSON ({str(error)[:60]})") from None
    if not isinstance(data, dict):
        raise ParseError(SOURCE, "not a JSON object")
    start = data.get("start") if isinstance(data.get("start"), dict) else {}
    version = start.get("version", "")
    version = version[:40] if isinstance(version, str) else ""
    cookie = start.get("cookie", "")
    cookie = cookie if isinstance(cookie, str) and _COOKIE.fullmatch(cookie) else ""
    error = data.get("error")
    if error is not None:
        if not isinstance(error, str):
            raise ParseError(SOURCE, "error is not a string")
        return Iperf3Result(version=version, error=error[:200] or "iperf3 reported an empty error", cookie=cookie)
    end = data.get("end")
    if not isinstance(end, dict):
        raise ParseError(SOURCE, "no end object")
    forward = _bits(end, "sum_received")
    if forward is None:
        raise ParseError(SOURCE, "no end.sum_received (a UDP test, or a cut-off run?)")
    return Iperf3Result(forward, _bits(end, "sum_received_bidir_reverse"), _lowest_rtt(end), version, cookie=cookie)


def served_cookie(text: str) -> str:
    """The cookie of the client an ``iperf3 -s -1 --json`` server served (``start.cookie``), or
    "" when its report holds none (it did not start, or served nobody); its figures are not read.
    Text after the report (iperf3's own ``iperf3: exiting``) is ignored.

    >>> served_cookie('{"start": {"cookie": "abcdefgh2345"}, "end": {}}\\niperf3: exiting\\n')
    'abcdefgh2345'
    """
    if len(text) > MAX_BYTES:
        return ""
    try:
        data = json.loads(text[: text.rfind("}") + 1])
    except (ValueError, RecursionError):
        return ""
    start = data.get("start") if isinstance(data, dict) else None
    cookie = start.get("cookie") if isinstance(start, dict) else None
    return cookie if isinstance(cookie, str) and _COOKIE.fullmatch(cookie) else ""
