"""Heterogeneity summary and JSON output."""

import json

from conftest import capture_dir
from provision.probe.gather import Capture
from provision.probe.report import heterogeneity, results_json
from provision.probe.run import ProbeResult, facts_from_captures


def result(host, fixture):
    return facts_from_captures(host, {n: Capture(n, 0, t, "") for n, t in capture_dir(fixture).items()})


def test_odd_host_out_is_named():
    results = [result("a", "minsky"), result("b", "minsky"), result("c", "vm-x86")]
    lines = heterogeneity(results)
    assert lines[0].startswith("1 of 3 hosts differ")
    assert lines[1].startswith("c: ") and "2x10x8" in lines[1]


def test_uniform_cluster_has_no_warning():
    assert heterogeneity([result("a", "minsky"), result("b", "minsky")]) == []


def test_json_has_errors_and_facts():
    doc = json.loads(results_json([result("a", "minsky"), ProbeResult("z", None, "auth", "authentication failed")]))
    assert doc["hosts"][1] == {"host": "z", "status": "auth", "error": "authentication failed", "facts": None}
    assert doc["hosts"][0]["facts"]["cpu"]["threads_per_core"] == 8


def test_host_error_with_markup_characters_is_shown_verbatim():
    from rich.console import Console

    from provision.probe.report import failure_lines, print_table

    console = Console(record=True, width=200)
    results = [ProbeResult("[/x]", error_kind="ssh", error="ssh: connect to host [fe80::1] port 22: [/x] refused")]
    print_table(results, console)
    text = console.export_text()
    assert "[/x]" in text and "ssh" in text
    # the message is one line under the table (not a wrapped cell): verbatim
    assert failure_lines(results) == ["[/x]: ssh: ssh: connect to host [fe80::1] port 22: [/x] refused"]
