"""The iperf3 --json parser on real outputs (tests/fixtures/outputs/iperf3, see SOURCES.md) and on
hostile ones: a failure iperf3 reports is a result with its error, anything else that is not
iperf3's output is a ParseError (that pair fails, never the run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provision.errors import ParseError
from provision.facts.iperf3 import MAX_BYTES, parse_iperf3

OUTPUTS = Path(__file__).parent / "fixtures" / "outputs" / "iperf3"


def test_bidir_reads_both_receivers_and_the_lowest_sender_round_trip():
    result = parse_iperf3((OUTPUTS / "bidir.json").read_text())
    assert result.version == "iperf 3.12"
    assert result.forward_gbps == pytest.approx(3.867356703216564)  # end.sum_received
    assert result.reverse_gbps == pytest.approx(3.432775290861596)  # end.sum_received_bidir_reverse
    assert result.rtt_us == 42  # the senders said 878 us (client) and 42 us (server, the reverse stream)
    assert result.error == ""


def test_a_throttled_direction_is_the_slow_one():
    result = parse_iperf3((OUTPUTS / "bidir-tbf-100mbit.json").read_text())
    assert result.forward_gbps == pytest.approx(0.09330895991445893)  # the client's eth0 had tbf 100mbit
    assert result.reverse_gbps == pytest.approx(0.6531519873108815)
    assert result.rtt_us == 32  # the unshaped direction's sender; the shaped one queued 10219 us


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("refused.json", "unable to connect to server: Connection refused"),
        ("connect-timeout.json", "unable to connect to server: Connection timed out"),
    ],
)
def test_a_failure_iperf3_reports_is_its_error(name, error):
    result = parse_iperf3((OUTPUTS / name).read_text())
    assert result.error == error and result.forward_gbps is None


def test_without_bidir_only_the_forward_direction_is_known():
    data = json.loads((OUTPUTS / "bidir.json").read_text())
    del data["end"]["sum_sent_bidir_reverse"], data["end"]["sum_received_bidir_reverse"]
    result = parse_iperf3(json.dumps(data))
    assert result.forward_gbps == pytest.approx(3.867356703216564) and result.reverse_gbps is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "iperf3: error - unable to connect to server",
        "[]",
        '{"end": []}',
        '{"end": {}}',
        '{"end": {"sum_received": {"bits_per_second": "fast"}}}',
        '{"end": {"sum_received": {"bits_per_second": -1}}}',
        '{"end": {"sum_received": {"bits_per_second": true}}}',
        '{"end": {"sum_received": {"bits_per_second": 1e999}}}',
        '{"end": {"sum_received": {"bits_per_second": 1}, "streams": {}}}',
        '{"error": 5}',
        "[" * 100000,
    ],
)
def test_output_that_is_not_iperf3s_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_iperf3(text)


def test_output_over_the_cap_is_refused_before_it_is_read():
    with pytest.raises(ParseError, match="over"):
        parse_iperf3(" " * (MAX_BYTES + 1))
