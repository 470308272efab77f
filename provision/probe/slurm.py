"""Probe through Slurm: one ``salloc`` + ``srun --nodes=N --ntasks-per-node=1`` instead of SSH to each node.

The submit host (the controller itself, or a login node over SSH) runs templates/commands/probe-slurm.sh.j2:
it allocates the nodes, prints their names in task order, and runs the same gather script as the
SSH probe (:func:`provision.probe.gather.gather_script`) as one task per node. What comes back is one
stream for all nodes, so who wrote each byte must not depend on anything a node prints:

- ``srun --label`` puts the task number before every line. srun adds it from the task whose
  stream slurmstepd delivered the bytes on; a node can only print lines of its own task, and
  ``0: @@nonce@@ hostname`` printed by task 2 arrives as ``2: 0: @@nonce@@ hostname``.
- Each task's stdout and stderr are base64 (srun cuts lines at 1 KiB and would add newlines;
  stderr's lines start with ``.``, so that what the task's shell says there is kept apart);
  decoded per task, each node's bytes are split with :func:`provision.probe.gather.split_output`
  under the same rules as the SSH probe: a node that learns the nonce can forge frames of its
  own output only, and those fail that node alone.
- Task ``i`` is the ``i``-th node of the allocation (block distribution, one task per node);
  the node list is printed by the submit host's script before srun starts (an unlabelled frame
  of :mod:`provision.transport.frames` no task can print), and the names are checked as host
  names before they name a file.
"""

from __future__ import annotations

import base64
import binascii
import re
import shlex
import time
from dataclasses import dataclass

from provision.errors import ParseError, ProvisionError
from provision.inventory.model import HOST_NAME, Host
from provision.probe.gather import gather_script, new_nonce, split_output
from provision.probe.run import ProbeResult, facts_from_captures
from provision.resources import render
from provision.text import shown_value
from provision.transport.connection import run_command
from provision.transport.frames import frame_line, frame_setup, split_frames
from provision.transport.options import HostFailure, SshOptions

__all__ = ["SlurmRequest", "SlurmProbeError", "probe_script", "probe_via_slurm", "results_from_output"]

_PARTITION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_NODELIST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._,\[\]-]{0,4095}\Z")
_LABEL = re.compile(r"^ *(\d{1,7}): (.*)\Z")
_TASK_MESSAGE = re.compile(r"^srun: error: ([\w.-]{1,253}): tasks? (\d{1,7})(?:-\d{1,7})?: (.{0,200})")
_BAD_INPUT = ("invalid partition", "invalid node name", "invalid nodelist", "node count specification invalid")
SHOWN = 300  # characters of a Slurm message quoted in an error


class SlurmProbeError(ProvisionError):
    """The allocation failed (no node ran anything); ``code`` 2 for bad input, else 1."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SlurmRequest:
    """Which nodes to allocate: a partition, a node list (Slurm's hostlist), a node count, and how
    long to wait for the allocation (salloc --immediate) before giving up."""

    partition: str | None = None
    nodelist: str | None = None
    nodes: int | None = None
    wait_seconds: int = 60

    def check(self) -> None:
        """Refuse anything that is not a Slurm name: these become salloc's words on the submit host."""
        if self.partition is not None and not _PARTITION.match(self.partition):
            raise SlurmProbeError(f"--partition {shown_value(self.partition[:60])}: not a Slurm partition name", 2)
        if self.nodelist is not None and not _NODELIST.match(self.nodelist):
            raise SlurmProbeError(f"--nodelist {shown_value(self.nodelist[:60])}: not a Slurm host list (node[01-04],gpu5)", 2)
        if self.nodes is not None and not 1 <= self.nodes <= 1_000_000:
            raise SlurmProbeError(f"--nodes {self.nodes}: at least 1", 2)
        if self.nodes is None and self.nodelist is None:
            raise SlurmProbeError("say which nodes: --nodes N (of --partition) or --nodelist node[01-04]", 2)
        if not 1 <= self.wait_seconds <= 86_400:
            raise SlurmProbeError(f"--alloc-wait {self.wait_seconds}: 1 to 86400 seconds", 2)

    def arguments(self) -> list[str]:
        """The positional arguments of the submit host's script (empty: not given)."""
        return [self.partition or "", self.nodelist or "", str(self.nodes or ""), str(self.wait_seconds)]


def probe_script(nonce: str) -> str:
    """The script the submit host runs on ``sh -s -- PARTITION NODELIST NODES WAIT``."""
    return render(
        "probe-slurm.sh.j2",
        nonce=nonce,
        gather=gather_script(nonce).rstrip("\n"),
        frame_setup=frame_setup(nonce),
        frame_line=frame_line("nodes"),
    )


def _by_task(text: str) -> tuple[dict[int, list[str]], list[str]]:
    """Labelled lines by task number, and the unlabelled lines (srun's, salloc's, the script's)."""
    tasks: dict[int, list[str]] = {}
    plain = []
    for line in text.splitlines():
        match = _LABEL.match(line)
        if match:
            tasks.setdefault(int(match.group(1)), []).append(match.group(2))
        else:
            plain.append(line)
    return tasks, plain


def _decoded(lines: list[str], what: str) -> str:
    try:
        return base64.b64decode("".join(lines), validate=True).decode(errors="replace")
    except (binascii.Error, ValueError):
        raise ParseError("probe", f"{what} is not the base64 its task sent (hostile or corrupt output)") from None


def _stderr_of(lines: list[str]) -> tuple[list[str], list[str]]:
    """A task's base64 stderr lines (each sent as ``.`` + base64), and the plain ones its shell
    printed past base64 ("Killed")."""
    return [line[1:] for line in lines if line.startswith(".")], [line for line in lines if not line.startswith(".")]


def _allocation_error(plain_stderr: list[str], code: int, submit: str) -> SlurmProbeError:
    errors = [line for line in plain_stderr if "error" in line.lower()] or plain_stderr or [f"exit {code}"]
    message = errors[0].strip()
    bad_input = any(marker in message.lower() for marker in _BAD_INPUT)
    return SlurmProbeError(f"slurm on {submit}: no allocation: {message[:SHOWN]}", 2 if bad_input else 1)


def results_from_output(stdout: str, stderr: str, code: int, nonce: str, submit: str, seconds: float) -> list[ProbeResult]:
    """One :class:`ProbeResult` per allocated node from the submit host's output (pure).

    Raises :class:`SlurmProbeError` when no node list came back (the allocation failed)."""
    out_tasks, plain_out = _by_task(stdout)
    err_tasks, plain_err = _by_task(stderr)
    frames = split_frames("\n".join(plain_out), nonce)
    listed = [frame.body.partition("\n")[0].split() for frame in frames if frame.label == "nodes" and not frame.numbers]
    if len(listed) != 1 or not listed[0]:
        raise _allocation_error(plain_err, code, submit)
    nodes = listed[0]
    said: dict[int, list[str]] = {}  # srun's own lines about a task ("srun: error: sn2: task 1: Killed")
    for line in plain_err:
        if match := _TASK_MESSAGE.match(line.strip()):
            said.setdefault(int(match.group(2)), []).append(f"{match.group(1)}: task {match.group(2)}: {match.group(3)}")
    results = []
    for task, node in enumerate(nodes):
        if not HOST_NAME.match(node):
            results.append(ProbeResult(node[:60], None, "slurm", f"Slurm node name {shown_value(node[:60])} is not a host name"))
            continue
        encoded_stderr, plain_stderr = _stderr_of(err_tasks.get(task, []))
        # What srun said about the task, then what its shell said (both only quoted, never parsed).
        why = "; ".join([*said.get(task, []), *(shown_value(line[:80]) for line in plain_stderr[:2])])[:SHOWN]
        try:
            if task not in out_tasks:
                raise ParseError("probe", "no output from its srun task" + (f" ({why})" if why else ""))
            captures = split_output(_decoded(out_tasks[task], "stdout"), nonce, _decoded(encoded_stderr, "stderr"))
        except ParseError as error:
            results.append(ProbeResult(node, None, "slurm" if task not in out_tasks else "parse", _with(str(error), why)))
            continue
        outcome = facts_from_captures(node, captures)
        outcome.seconds = seconds
        results.append(outcome)
    return results


def _with(message: str, why: str) -> str:
    return message if not why or why in message else f"{message} (task: {why})"


def probe_via_slurm(submit: Host, request: SlurmRequest, options: SshOptions) -> list[ProbeResult]:
    """Allocate ``request``'s nodes from ``submit`` (localhost: this machine) and probe each in one srun.

    A node whose task fails or prints what is not its framed output gets an error result naming
    it; the other nodes' facts are kept. Raises :class:`SlurmProbeError` when nothing ran (no
    allocation: the partition or node list does not exist, the nodes are busy...) and
    :class:`HostFailure` when the submit host cannot be reached."""
    request.check()
    nonce = new_nonce()
    started = time.monotonic()
    command = "sh -s -- " + " ".join(shlex.quote(word) or "''" for word in request.arguments())
    try:
        done = run_command(submit, command, options, stdin=probe_script(nonce))
    except HostFailure as failure:
        raise SlurmProbeError(f"slurm on {submit.name}: {failure}", 1) from None
    return results_from_output(done.stdout, done.stderr, done.exit_code, nonce, submit.name, time.monotonic() - started)
