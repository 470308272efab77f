"""split_frames: found by ``str.find``, it must find exactly what the multi-line regular expression
it replaced finds (kept here as the specification), on any text a node can print."""

import re

from hypothesis import given, settings, strategies as st

from provision.transport.frames import _LABEL, Frame, frame_line, frame_setup, split_frames

NONCE = "0123456789abcdef01234567"


def by_regex(text: str, nonce: str) -> list[Frame]:
    """The implementation before issue 37: one regular expression over the whole text."""
    marker = re.compile(rf"^@@{re.escape(nonce)}@@ ({_LABEL})((?: [0-9]{{1,12}}){{0,2}})$", re.MULTILINE)
    matches = list(marker.finditer(text))
    frames = []
    for position, match in enumerate(matches):
        end = matches[position + 1].start() if position + 1 < len(matches) else len(text)
        body = text[match.end() + 1 : end]
        body = body[:-1] if body.endswith("\n") else body
        frames.append(Frame(match.group(1), tuple(int(n) for n in match.group(2).split()), body))
    return frames


# Pieces a hostile node would print to confuse the reader: the marker anywhere (also mid-line and
# twice on a line), labels, numbers too long, other nonces, every kind of line end and space.
PIECES = st.sampled_from(
    [
        f"@@{NONCE}@@ ",
        f"@@{NONCE}@@",
        "@@0123456789abcdef0123456@@ ",
        "@@",
        "hostname",
        ".rc",
        " 0",
        " 12",
        " 1234567890123",
        " -1",
        " ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "\x0b",
        "\u2028",
        "x" * 199,
        "y" * 201,
        "é",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=40))
def test_same_frames_as_the_regular_expression(pieces):
    text = "".join(pieces)
    assert split_frames(text, NONCE) == by_regex(text, NONCE)


def test_same_frames_on_a_real_probe_output():
    from conftest import FIXTURES

    # A real node's captures, framed as the gather script frames them (one frame each, exit codes).
    text = "login banner\n"
    for path in sorted((FIXTURES / "captures" / "node-hwloc").iterdir()):
        text += f"@@{NONCE}@@ {path.stem}\n{path.read_text()}\n@@{NONCE}@@ .rc 0\n"
    frames = split_frames(text, NONCE)
    assert frames == by_regex(text, NONCE)
    assert len(frames) == 2 * len(list((FIXTURES / "captures" / "node-hwloc").iterdir()))


def test_the_script_lines_print_what_the_reader_finds():
    import subprocess

    lines = [frame_setup(NONCE), frame_line("hostname"), "echo node1", frame_line(".rc", '"$rc"', newline_before=True)]
    script = "\n".join(lines)
    text = subprocess.run(["sh", "-c", "rc=3\n" + script], capture_output=True, text=True, check=True).stdout
    assert split_frames(text, NONCE) == [Frame("hostname", (), "node1\n"), Frame(".rc", (3,), "")]
