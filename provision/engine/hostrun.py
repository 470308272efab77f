"""One host's run: its fact cache, the changes decided but not yet applied, and its results.

Facts are read in as few framed round trips as possible: everything the host's tasks are known
to need is read in the first; a change's predicted effect updates the cache, and only facts a
change made unknowable are read again (in the same round trip that applies the pending changes).
A converged host therefore costs one connection and one round trip.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from provision.connection import HostFailure
from provision.engine.script import BECOME_FAILED, Step, build_script, new_nonce, parse_output, remote_command, stdin_for
from provision.errors import ParseError
from provision.inventory import Host
from provision.operations.base import UNKNOWN, FactKey, Write, printable
from provision.operations.facts import parse_fact
from provision.operations.system import EVERYTHING

HOSTINFO = FactKey("hostinfo")
# The value is masked to the end of its line (a multi-word secret is hidden whole).
_SECRET = re.compile(r"(?i)((?:pass(?:word|wd)?|secret|token|hashed_password|private)[\w.]*[^\S\r\n]*[=:][^\S\r\n]*)(\S[^\r\n]*)")
_PRIVATE = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL)


def mask_secrets(text: str) -> str:
    """Hide values of password/secret/token-like settings and private key blocks."""
    return _SECRET.sub(r"\1********", _PRIVATE.sub("(private key hidden)", text))


def unified_diff(change: Write, host: str | None = None) -> str:
    """The unified diff of a file change, secrets masked (or hidden entirely for secret files);
    the headers name ``host`` (``--- w1:/etc/hosts (before)``) when given."""
    path = f"{host}:{change.path}" if host else change.path
    if change.secret:
        return f"--- {path}\n+++ {path}\n(content hidden: secret)\n"
    try:
        old = (change.old or b"").decode().splitlines(keepends=True)
        new = change.content.decode().splitlines(keepends=True)
    except UnicodeDecodeError:
        return f"--- {path}\n+++ {path}\n(binary content differs)\n"
    lines = difflib.unified_diff(old, new, f"{path} (before)" if change.old is not None else "/dev/null", path)
    return mask_secrets("".join(line if line.endswith("\n") else line + "\n" for line in lines))


@dataclass
class TaskResult:
    """One task (one loop item) on one host."""

    host: str
    play: str
    task: str
    where: str
    status: str = "ok"  # ok, changed, failed, skipped
    item: Any = None
    changes: list[str] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)
    message: str = ""
    commands: list[str] = field(default_factory=list)  # what ran (or would run) on the node, for -v
    output: list[str] = field(default_factory=list)  # what each applied change printed, for -v
    no_log: bool = False  # the task's no_log: its output is never kept

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {
            "host": self.host,
            "play": self.play,
            "task": self.task,
            "where": self.where,
            "status": self.status,
            "item": self.item if isinstance(self.item, (str, int, float, bool, type(None))) else str(self.item),
            "changes": self.changes,
            "diff": self.diff,
            "message": self.message,
            "commands": self.commands,
            "output": self.output,
        }


class HostFailed(Exception):
    """This host stops its tasks (a failed change or an unreachable host)."""


@dataclass
class HostRun:
    """Mutable state of one host through the whole run."""

    host: Host
    session: Any
    check: bool = False
    password: str | None = None
    on_result: Callable[[TaskResult], None] | None = None
    facts: dict[FactKey, Any] = field(default_factory=dict)
    invalidated: set[FactKey] = field(default_factory=set)
    pending: list[tuple[Step, TaskResult]] = field(default_factory=list)
    results: list[TaskResult] = field(default_factory=list)
    registered: dict[str, Any] = field(default_factory=dict)
    unreachable: str | None = None
    failed: bool = False
    error: str = ""  # why the host stopped, when no task result says it
    round_trips: int = 0
    wanted: dict[FactKey, None] = field(default_factory=dict)  # facts later tasks are known to need

    def facts_hostname(self) -> str | None:
        """The name this host calls itself (from its facts), if read."""
        info = self.facts.get(HOSTINFO) or {}
        return info.get("hostname") or None

    # -- facts and changes ---------------------------------------------------------------------
    def record_effects(self, effects) -> None:
        """Update the cache with a change's predicted effects."""
        for key, value in effects:
            if key == EVERYTHING:
                info = self.facts.get(HOSTINFO)
                self.invalidated.update(self.facts)
                self.facts.clear()
                if info is not None:
                    self.facts[HOSTINFO] = info
            elif value is UNKNOWN:
                self.facts.pop(key, None)
                self.invalidated.add(key)
            else:
                self.facts[key] = value

    def view(self, keys: list[FactKey]) -> dict[FactKey, Any]:
        """The facts for ``keys``; in --check, facts a predicted change made unknowable read as absent."""
        return {key: self.facts.get(key) for key in keys}

    def need(self, keys: list[FactKey], as_root: bool) -> None:
        """Make sure ``keys`` are known: apply the pending changes and read the missing facts in
        one round trip (in --check, nothing is applied and unknowable facts stay absent)."""
        missing = [k for k in dict.fromkeys(keys) if k not in self.facts]
        if self.check:
            missing = [k for k in missing if k not in self.invalidated]
            if not missing:
                return
            self.round_trip(missing, as_root, apply=False)
            return
        if missing:
            # Re-read, in the same round trip, the facts later tasks need that changes made unknown.
            again = [k for k in self.wanted if k not in self.facts and k not in missing]
            self.round_trip(missing + again, as_root, apply=True)

    def flush(self) -> None:
        """Apply the pending changes (nothing in --check)."""
        if self.check:
            self.pending.clear()
        elif self.pending:
            self.round_trip([], False, apply=True)

    def round_trip(self, keys: list[FactKey], as_root: bool, apply: bool) -> None:
        """One framed script: pending changes in order, then the facts ``keys``."""
        steps = [step for step, _result in self.pending] if apply else []
        as_root = as_root or any(step.become or step.user for step in steps)
        nonce = new_nonce()
        script = build_script(steps, keys, nonce, as_root)
        self.round_trips += 1
        try:
            result = self.session.run(remote_command(as_root), stdin_for(script, as_root, self.password))
        except HostFailure as failure:
            self.unreachable = f"{failure.kind}: {failure}"
            self._abort_pending(f"host {failure.kind}: {failure}", "aborted")
            raise HostFailed(self.unreachable) from None
        try:
            output = parse_output(result.stdout, nonce)
        except ParseError as error:
            self._abort_pending(str(error))
            raise HostFailed(str(error)) from None
        if not output.began:
            reason = [printable(line, 200) for line in result.stderr.strip().splitlines()[-1:]] or [f"exit {result.exit_code}"]
            if result.exit_code == BECOME_FAILED or "sudo" in reason[0]:
                reason = [f"become (sudo) failed: {reason[0]}"]
            self._abort_pending(reason[0][:300])
            self.failed, self.error = True, reason[0][:300]
            raise HostFailed(reason[0])
        pending, self.pending = self.pending, []
        done = {index: (code, text) for index, code, text in output.steps}
        for index, (_step, task_result) in enumerate(pending if apply else []):
            code, text = done.get(index, (None, ""))
            if text and not task_result.no_log:
                task_result.output.append(mask_secrets(printable(text, 100_000, newlines=True)))
            if code == 0:
                continue
            if code is None:
                task_result.status, task_result.message = "aborted", "not applied: an earlier change failed"
                continue
            task_result.status = "failed"
            task_result.message = printable(text[-2400:], 100_000, newlines=True)[-600:] or f"exit {code}"
            self.failed = True
        if self.failed:
            raise HostFailed("a change failed")
        if not output.complete:
            self.unreachable = "connection lost before the round trip finished"
            raise HostFailed(self.unreachable)
        for index, key in enumerate(keys):
            if index not in output.facts:
                raise HostFailed(f"no output for fact {key.kind} {key.arg}")
            try:
                self.facts[key] = parse_fact(key, output.facts[index])
            except ParseError as error:
                self.failed = True
                raise HostFailed(str(error)) from None
            self.invalidated.discard(key)

    def _abort_pending(self, reason: str, status: str = "failed") -> None:
        for _step, task_result in self.pending:
            task_result.status, task_result.message = status, reason
        self.pending.clear()
