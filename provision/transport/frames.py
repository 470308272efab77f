"""One framing for every script provision runs on a node (probe's and doctor's gather script,
setup-cluster's round trips): each part of its output follows a frame line
``@@NONCE@@ LABEL [NUMBER [NUMBER]]`` that the script prints, with a random nonce per run.

The script holds the nonce in one shell variable (:func:`frame_setup`) and prints frames with
:func:`frame_line`; the controller splits the output with :func:`split_frames`. Node output is
hostile: a frame is believed only with the run's nonce, and a node that learns the nonce (it runs
the script) can still only print frames of the grammar; each reader then rejects a label, an
order or a repetition its own script cannot print (a forged frame).

Example::

    >>> text = "@@ab@@ begin\\nhello\\n@@ab@@ rc 0 2\\n"
    >>> [(f.label, f.numbers, f.body) for f in split_frames(text, "ab")]
    [('begin', (), 'hello'), ('rc', (0, 2), '')]
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

VARIABLE = "PROVISION_FRAME"  # the shell variable holding ``@@NONCE@@`` (no fact step sets it)
_LABEL = r"\S{1,200}"  # any word: a label the reader does not know is a forged frame, said as such


def new_nonce(size: int = 12) -> str:
    """A fresh random frame marker (``size`` random bytes, as hex)."""
    return secrets.token_hex(size)


def frame_setup(nonce: str) -> str:
    """The script line that defines the frame marker (before the first :func:`frame_line`)."""
    return f"{VARIABLE}='@@{nonce}@@'"


def frame_line(label: str, *numbers: str | int, newline_before: bool = False, stderr: bool = False) -> str:
    """The ``printf`` that prints one frame: ``label`` (a constant word) and up to two numbers (ints,
    or sh words such as ``"$rc"``); ``newline_before`` ends a body that may lack its last newline."""
    fields = "".join(" %s" for _ in numbers)
    words = "".join(f" {number}" for number in numbers)
    lead = "\\n" if newline_before else ""
    return f"printf '{lead}%s {label}{fields}\\n' \"${VARIABLE}\"{words}" + (" >&2" if stderr else "")


def frame_record(label: str, *numbers: str | int, body: str = "", words: tuple[str, ...] = ()) -> str:
    """One ``printf`` that prints a frame and a one-line body (``body``: a printf format of the sh
    ``words``) in one write, so that records printed at once by parallel writers on one pipe never
    mix (a write under PIPE_BUF is whole)::

        >>> print(frame_record("ssh", '"$rc"', body="%s %.300s", words=('"$1"', '"$w"')))
        printf '%s ssh %s\\n%s %.300s\\n' "$PROVISION_FRAME" "$rc" "$1" "$w"
    """
    fields = "".join(" %s" for _ in numbers)
    arguments = "".join(f" {word}" for word in (*numbers, *words))
    return f"printf '%s {label}{fields}\\n{body}\\n' \"${VARIABLE}\"{arguments}"


@dataclass(frozen=True)
class Frame:
    """One frame: its ``label``, its ``numbers`` and the ``body`` printed after it (without the
    newline the next frame line added)."""

    label: str
    numbers: tuple[int, ...]
    body: str


# What follows ``@@NONCE@@ `` on a frame line, to the end of that line.
_REST = re.compile(rf"({_LABEL})((?: [0-9]{{1,12}}){{0,2}})$", re.MULTILINE)


def split_frames(text: str, nonce: str) -> list[Frame]:
    """The frames in ``text`` in order; what comes before the first frame is dropped (a login
    banner, a shell's greeting).

    A frame is a whole line ``@@NONCE@@ LABEL [NUMBER [NUMBER]]``, as the regular expression
    ``^@@NONCE@@ (LABEL)((?: [0-9]{1,12}){0,2})$`` (multi-line) finds it. The marker is found by
    ``str.find`` and only the rest of its line is matched: the expression run over the whole text
    tried every position of it (1 ms for probe's 60 kB per host, most of the splitting; issue 37).
    """
    marker = f"@@{nonce}@@ "
    starts: list[int] = []
    matches: list[re.Match[str]] = []
    position = text.find(marker)
    while position != -1:
        if position == 0 or text[position - 1] == "\n":
            match = _REST.match(text, position + len(marker))
            if match is not None:
                starts.append(position)
                matches.append(match)
                position = text.find(marker, match.end())
                continue
        position = text.find(marker, position + 1)
    frames = []
    for index, match in enumerate(matches):
        end = starts[index + 1] if index + 1 < len(starts) else len(text)
        body = text[match.end() + 1 : end]
        body = body[:-1] if body.endswith("\n") else body
        frames.append(Frame(match.group(1), tuple(int(n) for n in match.group(2).split()), body))
    return frames
