"""What `provision probe` runs on a host: one POSIX sh script, one round trip.

Each step is a fixed command (no user value ever goes into it), declared next to its parser
(:class:`provision.facts.registry.Fact`): every fixed fact of ``provision/facts/`` is a step. The
streamed output is framed with a random nonce per run (:mod:`provision.transport.frames`, the
framing setup-cluster's round trips use too), so no honest command's output is mistaken for a
frame. A hostile node can still learn the nonce (it runs the script): :func:`split_output`
accepts only the known capture names, once each, so nothing it prints can name a file.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from provision import __version__
from provision.errors import ParseError
from provision.facts.registry import Fact, probe_facts
from provision.resources import render
from provision.text import shown_value
from provision.transport.frames import frame_line, frame_setup, new_nonce, split_frames

__all__ = [
    "CAPTURE_NAMES",
    "Capture",
    "NOT_INSTALLED",
    "REMOTE_COMMAND",
    "STEPS",
    "Fact",
    "capture_script",
    "gather_script",
    "new_nonce",
    "split_output",
]

NOT_INSTALLED = 127
STDERR_KEPT = 2000  # characters of a failed step's stderr kept (the first line names the cause)
# The remote command: valid in every login shell (sh, bash, tcsh, fish). The script goes on its
# stdin, followed by EOF; see templates/commands/gather.sh.j2.
REMOTE_COMMAND = "sh -s"

# Every fixed fact of provision/facts/, each declared once beside its parser, in the registry's
# order (by module, then as declared): adding a module there adds its step.
STEPS: tuple[Fact, ...] = probe_facts()

CAPTURE_NAMES = tuple(step.name for step in STEPS)
if len(set(CAPTURE_NAMES)) != len(CAPTURE_NAMES):
    raise RuntimeError(f"two fact sources share a capture name: {CAPTURE_NAMES}")


@dataclass(frozen=True)
class Capture:
    """One step's result on one host."""

    name: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def available(self) -> bool:
        """True when the command ran and succeeded."""
        return self.exit_code == 0

    def why_unavailable(self) -> str:
        """A short reason for a failed or missing command."""
        if self.exit_code == NOT_INSTALLED:
            return "not installed"
        first = self.stderr.strip().splitlines()[0] if self.stderr.strip() else ""
        return f"exit {self.exit_code}" + (f": {first[:120]}" if first else "")


_SLOT = "0" * 24  # the nonce's place in the rendered script (hex, as a nonce is)
_rendered: dict[tuple[str, ...], tuple[str, str]] = {}
_rendered_lock = threading.Lock()


def _script_around_nonce(steps: tuple[Fact, ...]) -> tuple[str, str]:
    """The script of ``steps`` rendered once per process, split where its one nonce goes. Rendering
    per host cost a Jinja compile in each of the first ``--forks`` threads at once (Jinja's cache
    is not locked) and a render per host: most of the controller's CPU per host beyond SSH (issue 28)."""
    key = tuple(step.name for step in steps)
    with _rendered_lock:
        if key not in _rendered:
            setup = frame_setup(_SLOT)
            text = render("gather.sh.j2", mode="stream", steps=steps, version=__version__, frame=frame_line, frame_setup=setup)
            before, found, after = text.partition(setup)
            if not found or _SLOT in before + after:  # the nonce must be in exactly one place
                raise RuntimeError("gather.sh.j2: frame_setup must appear once and the nonce nowhere else")
            _rendered[key] = (before, after)
        return _rendered[key]


def gather_script(nonce: str, steps: tuple[Fact, ...] = STEPS) -> str:
    """The one script `provision probe` runs on a host, framing each output with ``nonce``
    (``steps``: probe's, or probe's plus the ones `provision doctor` adds).

    >>> one, two = gather_script("a" * 24), gather_script("b" * 24)
    >>> one.replace("a" * 24, "b" * 24) == two and "@@" + "a" * 24 + "@@" in one
    True
    """
    before, after = _script_around_nonce(steps)
    return before + frame_setup(nonce) + after


def capture_script() -> str:
    """The stand-alone script a user runs on a node to write ``DIR/<hostname>/<name>.txt`` files."""
    return render("gather.sh.j2", mode="dir", steps=STEPS, nonce="", version=__version__)


_NAME_SHOWN = 60  # characters of an unexpected frame name quoted in the error


def _stderr_by_step(stderr: str, nonce: str, names: tuple[str, ...]) -> dict[str, str]:
    """Each known step's stderr from the stderr stream (frames ``@@N@@ name``); others ignored."""
    return {f.label: f.body for f in split_frames(stderr, nonce) if f.label in names and not f.numbers}


def split_output(text: str, nonce: str, stderr: str = "", names: tuple[str, ...] = CAPTURE_NAMES) -> dict[str, Capture]:
    """Split the framed output of :func:`gather_script` into captures by name.

    stdout holds each step as ``@@N@@ name`` + its output + ``@@N@@ .rc CODE``; ``stderr``
    holds ``@@N@@ name`` + that step's stderr, kept only for a step that failed (at most
    :data:`STDERR_KEPT` characters). Raises :class:`ParseError` (source ``probe``) when the
    framing is broken (e.g. the connection dropped half way), and when a frame names anything
    but a known capture (``names``: the steps the script ran) or names one twice: the output is
    hostile or corrupt, and a capture name becomes a file name.
    """
    frames = split_frames(text, nonce)
    if not frames:
        raise ParseError("probe", "no framed output: the remote shell printed something else (is /bin/sh POSIX?)")
    errors = _stderr_by_step(stderr, nonce, names)
    captures: dict[str, Capture] = {}
    pending: tuple[str, str] | None = None
    for frame in frames:
        name, body = frame.label, frame.body
        if len(frame.numbers) > 1 or (frame.numbers and name != ".rc"):
            raise ParseError("probe", f"unexpected frame {shown_value(name[:_NAME_SHOWN])} (hostile or corrupt output)")
        if name == ".rc":
            if pending is None or not frame.numbers:
                raise ParseError("probe", "exit-code frame without a command frame")
            exit_code = frame.numbers[0]
            kept = "" if exit_code == 0 else errors.get(pending[0], body)[:STDERR_KEPT]
            captures[pending[0]] = Capture(pending[0], exit_code, pending[1], kept)
            pending = None
            continue
        if name not in names:
            raise ParseError(
                "probe", f"unexpected frame {shown_value(name[:_NAME_SHOWN])}: not a capture name (hostile or corrupt output)"
            )
        if name in captures or (pending is not None and pending[0] == name):
            raise ParseError("probe", f"frame {shown_value(name)} appears twice (hostile or corrupt output)")
        if pending is not None:
            raise ParseError("probe", f"output of {pending[0]} has no exit code: connection dropped?")
        pending = (name, body)
    if pending is not None:
        raise ParseError("probe", f"output ended inside {pending[0]}: connection dropped?")
    missing = [name for name in names if name not in captures]
    if missing:
        raise ParseError("probe", f"output is missing {', '.join(missing)}")
    return captures
