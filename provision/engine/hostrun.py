"""One host's run: what is known of its state (:mod:`provision.engine.statecache`), the changes
decided but not yet applied, and its results. This is where a task's **read** (step 2 of
:mod:`provision.engine.task`) and **apply** (step 5) meet the host: :meth:`HostRun.need` reads,
:meth:`HostRun.plan` queues, :meth:`HostRun.flush` applies, each in one framed round trip
(:func:`provision.engine.script.build_script`), and :meth:`HostRun._verify` puts each applied
change's exit status and output on its task's result (step 6, on the host).

Facts are read in as few framed round trips as possible: everything the host's tasks are known
to need is read in the first. A task decides only on facts no change planned since their reading
may have altered (or that a change stated exactly); any other fact it needs is read again at its
turn, in the round trip that applies the pending changes first, together with the facts the next
tasks need that were altered. A converged host therefore costs one connection and one round trip.

A task's result is reported (``on_result``) once it is final: a change when it was applied (or
failed), in task order, so the live output never contradicts the recap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from provision import defaults
from provision.engine.script import (
    BECOME_FAILED,
    Output,
    Step,
    build_script,
    parse_output,
    remote_command,
    round_trip_limit,
    stdin_for,
    upload_prelude,
)
from provision.engine.statecache import ANYTHING, IDENTITY, StateCache, scope_of
from provision.engine.uploads import send_uploads
from provision.engine.user_shells import fact_batches
from provision.errors import ParseError
from provision.inventory.model import Host
from provision.operations.base import StateKey, mask_secrets
from provision.operations.state import parse_state
from provision.text import printable, shown_value
from provision.transport.frames import new_nonce
from provision.transport.options import HostFailure

NO_LOG = "(no_log)"  # what a no_log task shows instead of a change, a diff or a failure


ITEM_NAMES = ("name", "path", "prefix", "user", "dest")  # the first a loop item has labels it in output


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
    no_log: bool = False  # the task's no_log: its changes, diffs and failure output are never shown
    detail: str = ""  # how the result was reached (--check: on which state it was predicted), for -v and --json

    def __setattr__(self, name: str, value: Any) -> None:
        # Every place that sets a message (the engine, a failed change's output) goes through
        # here, so a no_log task can never show one.
        if name == "message" and value and getattr(self, "no_log", False):
            value = NO_LOG
        object.__setattr__(self, name, value)

    def shown_item(self) -> Any:
        """The loop item as output shows it: as it is when a plain value, else its text; a
        no_log task's item never (a loop over secrets is what no_log is for)."""
        if self.item is None:
            return None
        if self.no_log:
            return NO_LOG
        return self.item if isinstance(self.item, (str, int, float, bool)) else str(self.item)

    def item_label(self) -> str:
        """The loop item in a one-line report: a dict item by its ``name``; "" without a loop."""
        if self.item is None:
            return ""
        if isinstance(self.item, dict) and not self.no_log:
            # What names the item to a person (a checksum or a whole record is detail: -v, --json).
            key = next((k for k in ITEM_NAMES if isinstance(self.item.get(k), (str, int))), None)
            if key is not None:
                return str(self.item[key])
        return str(self.shown_item())

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {
            "host": self.host,
            "play": self.play,
            "task": self.task,
            "where": self.where,
            "status": self.status,
            "item": self.shown_item(),
            "changes": self.changes,
            "diff": self.diff,
            "message": self.message,
            "detail": self.detail,
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
    password: str | None = field(default=None, repr=False)  # the become password: never in a repr or traceback
    on_result: Callable[[TaskResult], None] | None = None
    cache: StateCache = field(default_factory=StateCache)
    pending: list[tuple[Step, TaskResult]] = field(default_factory=list)
    results: list[TaskResult] = field(default_factory=list)
    registered: dict[str, Any] = field(default_factory=dict)
    unreachable: str | None = None
    failed: bool = False
    untrusted: bool = False  # its reported host keys lack the verified one: its hostinfo is not used
    connected_address: str | None = None  # where the controller reached it, host key verified (never its own report)
    error: str = ""  # why the host stopped, when no task result says it
    round_trips: int = 0
    wanted: dict[StateKey, None] = field(default_factory=dict)  # facts the next tasks are known to need
    decided: list[TaskResult] = field(default_factory=list)  # decided, not yet reported
    root: bool = False  # some task here runs as root: every round trip does (facts read as root)

    def identity(self) -> dict:
        """Host name, addresses and host keys (read in the first round trip), or {}."""
        return self.cache.hint(IDENTITY) or {}

    step_timeout: float | None = None  # seconds each change may run (--command-timeout); None: no limit of its own
    command_timeout: float = defaults.COMMAND_TIMEOUT  # seconds a round trip may read facts (the session's command timeout)

    def stop_reason(self) -> str:
        """Why this host stopped, in a few words, for the lines that say what was not checked
        after the run: ``unreachable (timeout: ...)``, ``failed at task 'NAME'`` or its error."""
        if self.unreachable:
            return f"unreachable ({self.unreachable[:160]})"
        task = next((r.task for r in self.results if r.status == "failed"), None)
        if task:
            return f"failed at task {shown_value(task)}"
        return f"failed ({(self.error or 'stopped')[:160]})"

    def facts_hostname(self) -> str | None:
        """The name this host calls itself (from its facts), if read."""
        return self.identity().get("hostname") or None

    # -- facts and changes ---------------------------------------------------------------------
    def plan(self, change, result: TaskResult, step: Step, exact: bool = True) -> None:
        """A change was decided: it is pending, and what it may alter is no longer trusted."""
        self.cache.plan(scope_of(change, exact))
        self.pending.append((step, result))

    def plan_unknown(self) -> None:
        """A --check prediction that could not say what it would change: trust nothing after it."""
        self.cache.plan(ANYTHING)

    def view(self, keys: list[StateKey]) -> dict[StateKey, Any]:
        """The trusted values of ``keys`` (None: absent on the host); UNKNOWN (--check only) where
        a planned change may have altered the fact."""
        return {key: self.cache.value(key) for key in keys}

    def hints(self, keys: list[StateKey]) -> dict[StateKey, Any]:
        """The last values read of ``keys``, trusted or not (--check predicts on them)."""
        return {key: self.cache.hint(key) for key in keys}

    def need(self, keys: list[StateKey], as_root: bool) -> None:
        """Make sure ``keys`` are known: read those without a trusted value in one round trip that
        first applies the pending changes, with the untrusted facts the next tasks need. One path
        for a run and --check: in --check nothing is applied, so a fact a planned change may have
        altered cannot be read (it stays UNKNOWN, and the task is predicted on its last value)."""
        as_root = as_root or self.root
        missing = self.cache.unknown(keys)
        again = [k for k in self.cache.unknown(self.wanted) if k not in missing and (as_root or not k.user)]
        if self.check:
            # The host shows the state before every planned change: read what none altered, and what
            # was never read (its value before the changes is the one --check predicts on: a fact
            # never read is not known absent, so a precondition is never foreseen to fail on nothing).
            missing, again = (
                [k for k in found if not self.cache.altered_since(k, 0) or not self.cache.was_read(k)]
                for found in (missing, again)
            )
        if missing:
            self.round_trip(missing + again, as_root, apply=not self.check)

    def flush(self) -> None:
        """Apply the pending changes (nothing in --check)."""
        if self.check:
            self.pending.clear()
            self.report_ready()
        elif self.pending:
            self.round_trip([], False, apply=True)

    def finish(self, result: TaskResult) -> None:
        """``result`` is decided: report it (and those before it) once final."""
        self.decided.append(result)
        self.report_ready()

    def report_ready(self, everything: bool = False) -> None:
        """Report, in task order, the decided results whose changes are applied (or all)."""
        waiting = {id(result) for _step, result in self.pending}
        while self.decided and (everything or id(self.decided[0]) not in waiting):
            result = self.decided.pop(0)
            if self.on_result:
                self.on_result(result)

    def round_trip(self, keys: list[StateKey], as_root: bool, apply: bool) -> None:
        """One framed script: pending changes in order (when ``apply``), then the facts ``keys``."""
        steps = [step for step, _result in self.pending] if apply else []
        as_root = as_root or any(step.become or step.user for step in steps)
        output = self._run_script(steps, keys, as_root)
        pending, self.pending = self.pending, []
        self._verify(pending if apply else [], output)
        self.report_ready()
        epoch = self.cache.epoch if apply else 0  # in --check the host still shows the state before every change
        self._store_facts(keys, output, epoch)

    def _run_script(self, steps: list[Step], keys: list[StateKey], as_root: bool) -> Output:
        """Send the uploads and the script, and split its framed output (a host that cannot be
        reached, a forged stream or a failed become stops the host)."""
        nonce = new_nonce()
        self.round_trips += 1
        folder = None
        try:
            folder = send_uploads(self.session, steps)  # issue 15: files over SFTP, before the script
            script = upload_prelude(folder) + build_script(steps, keys, nonce, as_root, self.step_timeout)
            # a round trip that applies changes may run as long as their own limits together
            limit = {"timeout": round_trip_limit(steps, self.step_timeout, self.command_timeout)} if steps else {}
            result = self.session.run(remote_command(as_root), stdin_for(script, as_root, self.password), **limit)
        except HostFailure as failure:
            self.unreachable = f"{failure.kind}: {failure}"
            self._abort_pending(f"host {failure.kind}: {failure}", "aborted")
            raise HostFailed(self.unreachable) from None
        finally:
            if folder:
                self.session.remove_private_dir(folder)
        try:
            output = parse_output(result.stdout, nonce, fact_batches(keys, as_root))
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
        return output

    def _verify(self, applied: list[tuple[Step, TaskResult]], output: Output) -> None:
        """Each applied change's output and outcome on its task's result; the host stops at a
        failed change, or when the connection was lost before the script's end."""
        done = {index: (code, text) for index, code, text in output.steps}
        for index, (_step, task_result) in enumerate(applied):
            code, text = done.get(index, (None, ""))
            if text and not task_result.no_log:
                task_result.output.append(mask_secrets(printable(text, 100_000, newlines=True)))
            if code == 0:
                continue
            if code is None:
                if task_result.status != "failed":  # a task's later change must not hide its failed one
                    task_result.status, task_result.message = "aborted", "not applied: an earlier change failed"
                continue
            task_result.status = "failed"
            task_result.message = printable(text[-2400:], 100_000, newlines=True)[-600:] or f"exit {code}"
            self.failed = True
        if self.failed:
            self.report_ready()
            raise HostFailed("a change failed")
        if not output.complete:
            self.unreachable = "connection lost before the round trip finished"
            raise HostFailed(self.unreachable)

    def _store_facts(self, keys: list[StateKey], output: Output, epoch: int) -> None:
        """Parse each fact read and keep it as true since ``epoch``; output a fact's parser
        refuses stops the host."""
        for index, key in enumerate(keys):
            if index not in output.facts:
                raise HostFailed(f"no output for fact {key.kind} {key.arg}")
            try:
                value = parse_state(key, output.facts[index])
            except Exception as error:  # noqa: BLE001 - whatever a node printed fails that host alone
                self.failed, self.error = (
                    True,
                    printable(f"{key.kind} {key.arg}: {error}" if not isinstance(error, ParseError) else str(error)),
                )
                raise HostFailed(self.error) from None
            self.cache.store(key, value, epoch)

    def _abort_pending(self, reason: str, status: str = "failed") -> None:
        for _step, task_result in self.pending:
            task_result.status, task_result.message = status, reason
        self.pending.clear()
        self.report_ready()
