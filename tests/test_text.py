"""Every byte from a node is shown with its control characters escaped (issue 24 finding 7):
one function, provision.text.shown, behind every way provision prints."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli
from provision.probe.gather import CAPTURE_NAMES, Capture
from provision.probe.run import facts_from_captures
from provision.probe.store import save_host
from provision.text import printable, shown, shown_value

# OSC 52 writes the terminal's clipboard; ESC[2J clears the screen; U+202E reverses what follows.
OSC52 = "\x1b]52;c;cm0gLXJmIH4gIw==\x07"
CLEAR = "\x1b[2J"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"V100{OSC52}{CLEAR}", "V100\\x1b]52;c;cm0gLXJmIH4gIw==\\x07\\x1b[2J"),
        ("ok\rhidden", "ok\\x0dhidden"),
        ("\x9b2J", "\\x9b2J"),  # C1 CSI: one byte, as good as ESC [ to many terminals
        ("abc\u202edef", "abc\\u202edef"),
        ("Tesla V100-SXM2 ×4", "Tesla V100-SXM2 ×4"),  # printable text is left alone
    ],
)
def test_shown_escapes_control_characters(text, expected):
    assert shown(text) == expected


def test_lines_and_tabs_kept_unless_one_line_is_asked_for():
    assert shown("a\tb\nc") == "a\tb\nc" and shown("a\tb\nc", newlines=False) == "a\\x09b\\x0ac"


def test_printable_is_shown_cut_to_a_length():
    assert printable(f"  x{OSC52}\n", 12) == "x\\x1b]52;..." and "\x1b" not in printable(OSC52 * 10, 300)


def _hostile_capture(tmp_path: Path) -> Path:
    root = tmp_path / "cap"
    shutil.copytree(FIXTURES / "captures" / "node-hwloc", root / "evil")
    (root / "evil" / "nvidia-smi-query.txt").write_text(f"0, Tesla V100{OSC52}{CLEAR}, 00000000:04:00.0, 16160 MiB\n")
    return root


def test_probe_table_and_topology_show_a_gpu_name_escaped(tmp_path):
    done = run_cli("probe", "--replay", str(_hostile_capture(tmp_path)), "--no-save", "--topology")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "V100\\x1b]52;c;" in done.stdout.replace("\n", "").replace("│", "").replace(" ", "")


def test_probe_json_never_carries_a_raw_escape(tmp_path):
    done = run_cli("probe", "--replay", str(_hostile_capture(tmp_path)), "--no-save", "--json")
    assert done.returncode == 0 and "\x1b" not in done.stdout and "\\u001b]52" in done.stdout


def test_slurm_gres_error_shows_a_failing_steps_stderr_escaped(tmp_path):
    captures = {n: Capture(n, 0, t, "") for n, t in _capture_texts("node-hwloc").items()}
    captures["nvidia-smi-query"] = Capture("nvidia-smi-query", 9, "", f"NVML: driver mismatch{OSC52}{CLEAR}\n")
    facts = facts_from_captures("evil", captures).facts
    save_host(tmp_path / "facts", facts, captures)
    done = run_cli("slurm-gres", "evil", "--facts-dir", str(tmp_path / "facts"))
    assert done.returncode == 1 and "nvidia-smi failed (exit 9: NVML: driver mismatch\\x1b]52;c;" in done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr


def test_an_error_message_is_escaped(tmp_path):
    """The CLI's one error path (provision: error: ...) escapes whatever reached the message."""
    done = run_cli("probe", "--replay", str(tmp_path / f"cap{CLEAR}"))
    assert done.returncode == 2 and "\x1b" not in done.stderr and "cap\\x1b[2J: no such capture folder" in done.stderr


def _capture_texts(host: str) -> dict[str, str]:
    folder = FIXTURES / "captures" / host
    return {n: (folder / f"{n}.txt").read_text() for n in CAPTURE_NAMES if (folder / f"{n}.txt").exists()}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("abc", "'abc'"),
        ("", "''"),
        ("it's C:\\x", "'it's C:\\x'"),  # repr: "it's C:\\x"
        (f"a{CLEAR}\nb\u202e", "'a\\x1b[2J\\x0ab\\u202e'"),  # one line, nothing obeyed
        (None, "(empty)"),  # a YAML key left empty
        (True, "true"),
        (8080, "8080"),
        (["a", 1, None], "['a', 1, (empty)]"),
        ({"key": "x\x07"}, "{'key': 'x\\x07'}"),
        ("x" * 100, "'" + "x" * 80 + "…'"),
    ],
)
def test_a_value_in_a_message_is_shown_on_one_line_as_typed(value, expected):
    assert shown_value(value) == expected
