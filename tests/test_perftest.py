"""perftest's and nccl-tests' report parsers on real published outputs (tests/fixtures/SOURCES.md):
these tools need RDMA devices and GPUs, which this machine lacks, so their parsers are what is
tested here, on what the tools really printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.errors import ParseError
from provision.facts.nccl_tests import parse_all_reduce
from provision.facts.perftest import parse_write_bw, parse_write_lat

OUTPUTS = Path(__file__).parent / "fixtures" / "outputs"


def test_ib_write_bw_in_gbits():
    assert parse_write_bw((OUTPUTS / "perftest" / "ib_write_bw-postlist-gbits.txt").read_text()) == 0.48


def test_ib_write_bw_in_mebibytes_is_converted_to_gbits():
    text = (OUTPUTS / "perftest" / "ib_write_bw-postlist-gbits.txt").read_text()
    text = text.replace("[Gb/sec]", "[MB/sec]").replace("0.48", "11728.47")  # perftest#225's 100G figure
    assert parse_write_bw(text) == pytest.approx(11728.47 * 8 * 1048576 / 1e9)  # 98.4 Gbit/s


def test_the_latency_table_skips_perftests_warning_and_takes_t_typical():
    assert parse_write_lat((OUTPUTS / "perftest" / "ib_read_lat-mlx4.txt").read_text()) == 1.79


@pytest.mark.parametrize(
    "text",
    [
        "",
        " Couldn't connect to 10.0.0.2:18515\n",
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n---\n",
        " #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n 65536 5000\n",
        "x" * (1 << 19),
    ],
)
def test_a_bandwidth_report_that_does_not_read_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_write_bw(text)


def test_all_reduce_reads_nccl_tests_summary_and_the_largest_size():
    report = parse_all_reduce((OUTPUTS / "nccl-tests" / "all_reduce_perf-ring-5sizes.txt").read_text())
    assert report.busbw_gbytes == 95.3009 and report.wrong == 0
    assert report.largest_bytes == 8589934592 and report.largest_busbw_gbytes == pytest.approx((95.10 + 94.80) / 2)
    report = parse_all_reduce((OUTPUTS / "nccl-tests" / "all_reduce_perf-tail.txt").read_text())
    assert report.busbw_gbytes == 84.8558 and report.largest_bytes == 133169160


def test_all_reduce_through_mpiruns_tag_output_and_a_failed_validation():
    text = (OUTPUTS / "nccl-tests" / "all_reduce_perf-ring-5sizes.txt").read_text()
    tagged = "".join(f"[1,0]<stdout>:{line}\n" for line in text.replace("0 OK", "248 FAILED").splitlines())
    report = parse_all_reduce(tagged)
    assert report.wrong == 248 and report.busbw_gbytes == 95.3009


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   536870912     134217728     float     sum      -1    10052   53.41   93.46      0\n",  # cut off: no summary
        "   1024  256  float  sum  -1  5.0  nan  nan  0  5.0  1  1  0\n# Out of bounds values : 0 OK\n# Avg bus bandwidth : 1\n",
        "x" * (1 << 21),
    ],
)
def test_an_all_reduce_report_that_does_not_read_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_all_reduce(text)
