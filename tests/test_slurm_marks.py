"""Slurm marks by LBNL NHC's rule (templates/commands/slurm-mark.sh.j2, provision/plans/slurm_marks.py).

The sh runs here against TEST STAND-INs of sinfo, scontrol and sudo (tests/standins/slurm/), one
case per state and reason the rule must handle; tests/test_slurm_drain_cluster.py runs it against
the real slurmctld. Each rule is kept beside the source it follows, quoted verbatim:

LBNL NHC, mej/nhc at 9c4a38c0c9f48f92005c9120ca88145c33841dac:
- README.md:299: 'It looks for the string "NHC:" in the note to distinguish between notes set by
  NHC and notes set by operators.' Ours is ``provision:`` (MARKER).
- helpers/node-mark-offline:61: ``LINE=( $($SLURM_SINFO -o '%t %E' -hn $HOSTNAME) )``: the short
  state and the reason, as provision_sinfo reads them (with the name first, for many nodes at once).
- helpers/node-mark-offline:66-68: ``*'@'*|*'#'*|boot*|*-*|plnd*)`` / ``# These states aren't
  handled yet.``
- helpers/node-mark-offline:82: ``# If there's an old note that wasn't set by NHC, preserve it.``
  (NHC re-drains with the operator's note; provision leaves such a node untouched: same effect.)
- helpers/node-mark-offline:90-91: ``down*)`` / ``echo "$0:  Not changing state of down node $HOSTNAME."``
- helpers/node-mark-online:74-76: ``# If there IS an old note, but it wasn't set by NHC, do not
  online the node.`` / ``if [[ "$OLD_NOTE_LEADER" != "none" && "$OLD_NOTE_LEADER" != "$LEADER" ]]; then``
- helpers/node-mark-online:80: ``exec $SLURM_SCONTROL $SLURM_SC_ONLINE_ARGS NodeName=$HOSTNAME``
  with ``SLURM_SC_ONLINE_ARGS="${SLURM_SC_ONLINE_ARGS:-update State=RESUME}"`` (line 54).

Slurm, SchedMD/slurm at tag slurm-22-05-8-1 (d525b6872a106d32916b33a8738f12510ec7cf04, Debian
bookworm's 22.05.8):
- src/scontrol/update_node.c:170-177: ``if (*val == '"')`` / ``reason_str = xstrdup(val + 1);`` ...
  ``if ((len >= 0) && (reason_str[len] == '"'))`` / ``reason_str[len] = '\\0';``: a reason's leading
  and trailing double quote are dropped, so provision's reasons hold none.
"""

from __future__ import annotations

import subprocess

import pytest

from marks_support import scontrol_calls, slurm_standin
from provision.doctor.drain import marks_script
from provision.errors import ParseError
from provision.plans.slurm_marks import MARKER, REASON_MAX, Mark, drain_reason, drained_by, parse_marks, safe_reason

GPU = "provision: gpu count: nvidia-smi lists 1 GPU(s), expected 2"


def _run(tmp_path, nodes: str, *calls: str, files: dict[str, str] | None = None) -> tuple[list[Mark], list[str]]:
    folder = tmp_path / "slurm"
    env = slurm_standin(folder, nodes)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    done = subprocess.run(["sh", "-s"], input=marks_script(list(calls)), env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return parse_marks(done.stdout), scontrol_calls(folder)


CASES = [
    # (case, sinfo line of sn1, call, outcome, detail, scontrol calls)
    (
        "up and failing: drained",
        "sn1 idle none",
        f"sn1 drain '{GPU}'",
        "drained",
        GPU,
        [f"update | NodeName=sn1 | State=DRAIN | Reason={GPU}"],
    ),
    (
        "allocated: drained (its jobs finish)",
        "sn1 alloc none",
        f"sn1 drain '{GPU}'",
        "drained",
        GPU,
        [f"update | NodeName=sn1 | State=DRAIN | Reason={GPU}"],
    ),
    (
        "not responding but idle: drained as NHC does",
        "sn1 idle* none",
        f"sn1 drain '{GPU}'",
        "drained",
        GPU,
        [f"update | NodeName=sn1 | State=DRAIN | Reason={GPU}"],
    ),
    (
        "an admin's drain: left, never drained again",
        "sn1 drain disk swap, ticket 4711",
        f"sn1 drain '{GPU}'",
        "left",
        "disk swap, ticket 4711",
        [],
    ),
    ("an admin's drain: never resumed", "sn1 drain disk swap", "sn1 resume 'gpu count'", "left", "disk swap", []),
    ("Slurm's own drain: never resumed", "sn1 drain Prolog error", "sn1 resume 'gpu count'", "left", "Prolog error", []),
    ("drained with no reason: left", "sn1 drain none", "sn1 resume 'gpu count'", "left", "none", []),
    (
        "NHC's drain: not provision's",
        "sn1 drain NHC: check_fs_mount: /scratch not mounted",
        "sn1 resume 'gpu count'",
        "left",
        "NHC: check_fs_mount: /scratch not mounted",
        [],
    ),
    ("ours, same reason: nothing done", f"sn1 drain {GPU}", f"sn1 drain '{GPU}'", "already", GPU, []),
    (
        "ours, another reason: the new one",
        "sn1 drng provision: memory: 1000 MiB, expected 2000",
        f"sn1 drain '{GPU}'",
        "drained",
        GPU,
        [f"update | NodeName=sn1 | State=DRAIN | Reason={GPU}"],
    ),
    (
        "ours, its check passed: resumed",
        f"sn1 drain {GPU}",
        "sn1 resume cpus 'gpu count' memory",
        "resumed",
        GPU,
        ["update | NodeName=sn1 | State=RESUME"],
    ),
    (
        "ours, its check did not run: kept",
        "sn1 drain provision: perf tcp eth0: bad node: slow with 3 of 3 peers",
        "sn1 resume cpus 'gpu count'",
        "kept",
        "provision: perf tcp eth0: bad node: slow with 3 of 3 peers",
        [],
    ),
    (
        "a check name is no pattern",
        "sn1 drain provision: dataset /data/a: missing",
        "sn1 resume '*' 'dataset /data/?'",
        "kept",
        "provision: dataset /data/a: missing",
        [],
    ),
    (
        "a check whose name starts another's: not it",
        "sn1 drain provision: gpu health: 1 GPU(s) with ECC errors",
        "sn1 resume gpu",
        "kept",
        "provision: gpu health: 1 GPU(s) with ECC errors",
        [],
    ),
    ("up and healthy: nothing", "sn1 mix none", "sn1 resume 'gpu count'", "up", "", []),
    ("down: left", "sn1 down* Not responding", f"sn1 drain '{GPU}'", "left", "state down*: Not responding", []),
    ("down with our reason: not resumed", f"sn1 down {GPU}", "sn1 resume 'gpu count'", "left", f"state down: {GPU}", []),
    (
        "rebooting: not handled",
        "sn1 drain@ provision: cpus: 7 CPU(s) online, expected 8",
        "sn1 resume cpus",
        "unhandled",
        "state drain@: provision: cpus: 7 CPU(s) online, expected 8",
        [],
    ),
    ("powered down: not handled", "sn1 idle~ none", f"sn1 drain '{GPU}'", "unhandled", "state idle~: none", []),
    ("planned by backfill: not handled", "sn1 plnd none", f"sn1 drain '{GPU}'", "unhandled", "state plnd: none", []),
    ("not in Slurm", "sn9 idle none", f"sn1 drain '{GPU}'", "unknown", "not a node of this Slurm cluster (sinfo -N)", []),
]


@pytest.mark.parametrize(("line", "call", "outcome", "detail", "calls"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_rule(tmp_path, line, call, outcome, detail, calls):
    marks, made = _run(tmp_path, f"{line}\n", call)
    assert marks == [Mark("sn1", outcome, detail)]
    assert made == calls


def test_many_nodes_one_sinfo_and_partitions_counted_once(tmp_path):
    nodes = f"sn1 idle none\nsn1 idle none\nsn2 drain {GPU}\nsn3 drain admin\nsn10 idle none\n"  # sn1 in two partitions
    marks, made = _run(tmp_path, nodes, f"sn1 drain '{GPU}'", "sn2 resume 'gpu count'", "sn3 resume 'gpu count'", "sn10 resume x")
    assert [(m.node, m.outcome) for m in marks] == [("sn1", "drained"), ("sn2", "resumed"), ("sn3", "left"), ("sn10", "up")]
    assert made == [f"update | NodeName=sn1 | State=DRAIN | Reason={GPU}", "update | NodeName=sn2 | State=RESUME"]


def test_a_reason_that_forges_a_line_for_another_node_leaves_that_node_alone(tmp_path):
    """An admin's reason with a newline in it (scontrol keeps one) prints a second line for sn1 on
    its own: two lines disagree, and the rule touches nothing."""
    nodes = f"sn2 drain disk swap\nsn1 drain {GPU}\nsn1 idle none\n"
    marks, made = _run(tmp_path, nodes, "sn1 resume 'gpu count'")
    assert marks == [Mark("sn1", "unhandled", "sinfo shows it in more than one state or reason")] and made == []


def test_refused_by_slurm_it_asks_sudo_and_a_failure_is_said(tmp_path):
    marks, made = _run(tmp_path, "sn1 idle none\n", f"sn1 drain '{GPU}'", files={"deny": ""})
    assert marks == [Mark("sn1", "drained", GPU)] and made == [f"sudo update | NodeName=sn1 | State=DRAIN | Reason={GPU}"]
    marks, _ = _run(tmp_path / "b", "sn1 idle none\n", f"sn1 drain '{GPU}'", files={"broken": ""})
    assert marks == [Mark("sn1", "failed", "scontrol: slurm_update error: Invalid node name specified second line")]


def test_sinfo_failing_is_one_line(tmp_path):
    folder = tmp_path / "slurm"
    env = slurm_standin(folder, "")
    (folder / "sinfo-fails").write_text("sinfo: error: Unable to contact slurm controller (connect failure)\n")
    done = subprocess.run(["sh", "-s"], input=marks_script(["sn1 resume x"]), env=env, capture_output=True, text=True)
    assert done.stdout == "sinfo-failed sinfo: error: Unable to contact slurm controller (connect failure)\n"


def test_reasons_are_one_line_of_ascii_without_double_quotes_and_bounded():
    reason = drain_reason("perf tcp eth0", '"bad"\nnode\x1b[2J \u202eevil' + "x" * 400)
    assert reason.startswith(f"{MARKER} perf tcp eth0: 'bad'\\x0anode\\x1b[2J \\u202eevil")
    assert len(reason) == REASON_MAX and reason.endswith("...") and reason.isascii() and '"' not in reason
    assert safe_reason("café") == "caf\\xe9" and drained_by(reason) and not drained_by("provisional: x")


@pytest.mark.parametrize(
    "text", ["mark sn1 exploded now", "mark sn1;rm drained x", "mark " + "n" * 65 + " drained x", "mark sn1"]
)
def test_an_outcome_the_script_cannot_print_is_refused(text):
    with pytest.raises(ParseError):
        parse_marks(text)
