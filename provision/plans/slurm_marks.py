"""Slurm marks by LBNL NHC's rule: provision's drain reasons, and the outcomes of the sh that sets them (pure).

provision drains a node with a reason that starts with its marker and names the check,
``provision: gpu count: nvidia-smi lists 1 GPU(s), expected 2``, and resumes only nodes whose
reason starts with the marker and names a check that has just passed there. The sh that does it
(``templates/commands/slurm-mark.sh.j2``) is one piece, included both by the node check Slurm runs on each
node (:mod:`provision.plans.node_check`) and by ``doctor --drain``'s script on the Slurm host
(:mod:`provision.doctor.drain`). Its rule is NHC's (mej/nhc, helpers/node-mark-offline and
node-mark-online, cited in tests/test_slurm_marks.py):

- a node drained (or draining) for a reason without the marker, an admin's or Slurm's own
  (``Prolog error``, ``Not responding``), is left alone: never drained again, never resumed;
- a node already drained by provision for another reason gets the new reason; for the same
  reason, nothing is done;
- a node down, failed or in maintenance is left alone; states NHC does not handle either
  (rebooting, powering up or down, planned by the backfill scheduler);
- a node up (idle, allocated, mixed, completing) is drained: Slurm lets its jobs finish.

One thing more than NHC: a resume needs the check named in the reason to have passed in this
run. A node drained for ``perf tcp eth0`` stays drained after a run without ``--perf``, and the
node check (which cannot test links) never resumes what ``doctor --drain`` drained for a link
test. Reasons are made safe here: printable ASCII on one line, no double quote (scontrol drops a
leading and a trailing one: SchedMD/slurm src/scontrol/update_node.c), at most
:data:`REASON_MAX` characters.

>>> drain_reason("gpu health", "GPU 0000:1a:00.0: row remapping pending\\x1b[2J")
'provision: gpu health: GPU 0000:1a:00.0: row remapping pending\\\\x1b[2J'
>>> parse_marks("mark sn2 drained provision: gpu count: 1 of 2\\nmark sn3 left disk swap")
[Mark(node='sn2', outcome='drained', detail='provision: gpu count: 1 of 2'), Mark(node='sn3', outcome='left', detail='disk swap')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from provision.errors import ParseError
from provision.text import printable

MARKER = "provision:"  # the first word of every reason provision sets (NHC's is "NHC:")
REASON_MAX = 200  # characters of a reason (Slurm keeps any length; sinfo -R and people read the start)
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # a Slurm NodeName provision writes (plans.slurm.node_name)
OUTCOMES = {
    "drained": "drained",
    "already": "already drained by provision for this",
    "resumed": "resumed",
    "kept": "left drained: the check that drained it did not pass in this run",
    "left": "left alone: drained or down for a reason provision did not set",
    "up": "up, nothing to do",
    "unknown": "not a Slurm node",
    "unhandled": "left alone: a state NHC's rule does not handle",
    "failed": "scontrol failed",
}
_LINE = re.compile(r"mark (\S{1,64}) ([a-z]{1,16}) ?(.*)")


@dataclass(frozen=True)
class Mark:
    """What the rule did to one node: an outcome of :data:`OUTCOMES` and its detail (a reason, or why)."""

    node: str
    outcome: str
    detail: str = ""


def safe_reason(text: str) -> str:
    """``text`` as a Slurm reason: control characters escaped, one line, printable ASCII, no double
    quote, at most :data:`REASON_MAX` characters."""
    ascii_only = printable(text, REASON_MAX * 2).encode("ascii", "backslashreplace").decode("ascii")
    flat = " ".join(ascii_only.replace('"', "'").split())
    return flat if len(flat) <= REASON_MAX else flat[: REASON_MAX - 3] + "..."


def drain_reason(check: str, why: str) -> str:
    """The reason provision drains a node with: its marker, the check's name, what is wrong."""
    return safe_reason(f"{MARKER} {check}: {why}")


def drained_by(reason: str) -> bool:
    """Whether ``reason`` is one provision set (it starts with the marker)."""
    return reason.startswith(MARKER + " ")


def check_node_name(name: str) -> str:
    """A Slurm node name safe as a shell word and an awk value, else ParseError."""
    if not NODE_NAME.fullmatch(name):
        raise ParseError("slurm-marks", f"not a Slurm node name: {printable(name, 40)}")
    return name


def parse_marks(text: str) -> list[Mark]:
    """The ``mark NODE OUTCOME DETAIL`` lines of the mark script (its other lines skipped; an
    outcome it cannot print is refused: ParseError); the detail escaped and cut."""
    marks = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith("mark "):
            continue
        match = _LINE.fullmatch(line)
        if match is None or match.group(2) not in OUTCOMES or not NODE_NAME.fullmatch(match.group(1)):
            raise ParseError("slurm-marks", f"unexpected line {printable(line, 80)}", number)
        marks.append(Mark(match.group(1), match.group(2), printable(match.group(3), 300)))
    return marks
