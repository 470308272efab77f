"""A task's life on one host, in the order it happens (pyinfra v3: a task is decided when reached):

1. **render**: its variables, its loop items and its arguments (a template becomes a ``file``
   with its content) — :class:`Render`;
2. **state needed**: the facts its operation asks for, each read as the task's reader —
   :func:`needed`;
3. **decide**: the operation on those facts as they are now (the host reads what it does not
   trust, after applying the pending changes first; the state model is
   :mod:`provision.engine.statecache`) — :func:`decide`;
4. **queue**: its changes wait on the host (:meth:`HostRun.plan`) and are applied in the next
   round trip: when a later task needs a fact they may alter, or at the play's end.

--check takes the same path: nothing is applied, so a fact a planned change may have altered is
not read again; the task is predicted on its last value (and said so).

Before any host is touched, :func:`predict` takes steps 1-2 for every task, so that a host's first
round trip reads every fact its tasks will need (one round trip for a converged host); a task whose
arguments use what is known only while running (another host's facts, a registered result) names
what it can (:func:`partial_requests`) and reads the rest when reached.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision.engine.hostrun import NO_LOG, HostFailed, HostRun, TaskResult, unified_diff
from provision.engine.script import LOGIN_USER, Step
from provision.engine.selection import BadInput
from provision.engine.verbosity import ran_text
from provision.errors import ArgumentError, NodeFault, ProvisionError, TemplateError
from provision.inventory.model import Host, check_user
from provision.operations import OPERATIONS
from provision.operations.base import UNKNOWN, OperationError, StateKey, Write, check_path
from provision.playbook.model import Play, Task
from provision.playbook.variables import Variables
from provision.resources import resource_dir
from provision.templating import evaluate_when, render_template, render_value, template_loader, variables_in
from provision.text import shown_value

NO_ITEM = object()  # a task without a loop runs once, without ``item``


# -- 1. render ---------------------------------------------------------------------------------
@dataclass
class Render:
    """What a task's templates see: the inventory's and play's variables, ``run_tags``, and while
    running the host's registered results and facts, ``hostvars`` and ``play_hosts``."""

    variables: Variables
    plays: list[Play]
    play_hosts: list[list[Host]]
    hostvars: dict[str, dict]  # a HostVars snapshot, replaced after each play (Runner.run)
    tags: frozenset[str] | None = None
    template_dirs: tuple = ()
    # secrets asked at the prompt, by operation and user ({"jupyter_config": {"alice": "..."}}):
    # given to that operation as its ``password`` argument, never written to a variable or a file
    prompted: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    names: dict[int, tuple[str, ...]] = field(default_factory=dict, repr=False)  # each play's host names, made once

    def context(self, host: Host, play: Play, run: HostRun | None, item: Any = NO_ITEM) -> dict:
        """Variables for one task on one host (``run`` None: before any host is touched)."""
        ctx = self.variables.for_host(host, play.vars)
        # Ansible's ansible_run_tags: what --tags asked for (["all"] without it), for a role that
        # runs when asked by name or by an inventory variable.
        ctx["run_tags"] = sorted(self.tags) if self.tags is not None else ["all"]
        if run is not None:
            ctx.update(run.registered)
            ctx["facts"] = run.identity()
            ctx["hostvars"] = self.hostvars
            number = self.plays.index(play)
            if number not in self.names:  # once per play, not per task and host (O(hosts²), issue 37)
                self.names[number] = tuple(h.name for h in self.play_hosts[number])
            ctx["play_hosts"] = self.names[number]
        if item is not NO_ITEM:
            ctx["item"] = item
        return ctx

    def arguments(self, task: Task, play: Play, ctx: dict) -> tuple[str, dict]:
        """The operation and its rendered arguments (a template becomes a ``file`` with content)."""
        if task.op == "command":
            args = {k: render_value(v, ctx, shell=k in ("cmd", "unless")) for k, v in task.args.items()}
        else:
            args = render_value(dict(task.args), ctx)
        asked = self.prompted.get(task.op, {})
        user = args.get("user") if asked and isinstance(args, dict) else None
        if isinstance(user, str) and user in asked and "password" not in args:
            args = {**args, "password": asked[user]}
        if task.op != "template":
            return task.op, args
        env = template_loader([*self.template_dirs, play.base / "templates"])
        content = render_template(env, str(args.pop("src")), ctx)
        return "file", {**args, "content": content}

    def loop_items(self, task: Task, ctx: dict) -> list:
        """The loop's items, or one run without ``item``."""
        if task.loop is None:
            return [NO_ITEM]
        items = render_value(task.loop, ctx)
        if not isinstance(items, list):
            raise BadInput(f"{task.where}: loop must give a list, got {type(items).__name__}")
        return items


def names_in(value: Any) -> set[str]:
    """The top-level variable names the templates inside ``value`` (dicts and lists walked) use."""
    if isinstance(value, dict):
        return set().union(*(names_in(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(names_in(v) for v in value)) if value else set()
    return variables_in(value) if isinstance(value, str) else set()


def becomes(task: Task, play: Play) -> bool:
    """Whether the task runs as root or as another user (its round trips run through sudo)."""
    return bool((task.become if task.become is not None else play.become) or task.become_user)


# -- 2. state needed ---------------------------------------------------------------------------
def partial_requests(task: Task, ctx: dict) -> list[StateKey]:
    """Facts of a task whose arguments are only partly known yet (e.g. a path known, the
    keys from other hosts not): enough to read its state in the first round trip."""
    if task.op == "template":  # its file, when the path is known already (issue 8's role templates)
        try:
            return [StateKey("file", check_path(render_value(task.args["path"], ctx)))]
        except Exception:  # noqa: BLE001 - not known yet
            return []
    if task.op not in OPERATIONS:
        return []
    operation = OPERATIONS[task.op]
    args = {}
    for name, spec in operation.args.items():
        try:
            args[name] = render_value(task.args[name], ctx) if name in task.args else spec.default
        except Exception:  # noqa: BLE001 - not known yet
            args[name] = None
    try:
        return operation.requests(args)
    except Exception:  # noqa: BLE001 - its facts are read when it runs
        return []


def reader_of(task: Task, play: Play, ctx: dict) -> str:
    """Who runs the task's own checks (``unless``): its become_user, root, or the login user."""
    if task.become_user:
        try:
            return check_user(render_value(task.become_user, ctx))
        except Exception:  # noqa: BLE001 - known per item only (read then)
            return ""
    become = task.become if task.become is not None else play.become
    return "root" if become else LOGIN_USER


def as_reader(keys: list[StateKey], reader: str) -> list[StateKey]:
    """``command`` facts run as the task's user, and a ``creates:`` (``exists``) is looked up as
    its become_user (that user's own name counts in a sticky folder such as /tmp); other facts
    are read as the round trip's."""
    return [
        dataclasses.replace(key, user=reader)
        if reader and (key.kind == "command" or (key.kind == "exists" and reader not in ("root", LOGIN_USER)))
        else key
        for key in keys
    ]


def predict(render: Render, play: Play, task: Task, host: Host, deferred: set[str]) -> list[list[StateKey]]:
    """Steps 1-2 before any host is touched: the facts of each loop item the task will run
    (``deferred``: the variables known only while running). Raises :class:`BadInput` naming
    file:line, task, host and cause for a task that can be checked now and is wrong, and
    :class:`NodeFault` where what ``host`` itself reported is wrong (that host alone fails the
    task when it reaches it; the run goes on)."""
    whens = task.when if isinstance(task.when, list) else [task.when]
    expressions = ["{{ " + w + " }}" for w in whens if isinstance(w, str)]
    later = bool(names_in([task.args, task.loop, expressions]) & deferred)
    try:
        items = render.loop_items(task, render.context(host, play, None))
    except NodeFault:
        raise
    except Exception as error:  # noqa: BLE001 - any render failure is reported the same way
        if later:
            return []
        raise bad_input(render.variables, task, host, error) from None
    predicted = []
    for item in items:
        ctx = render.context(host, play, None, item)
        try:
            if task.when is not None and not evaluate_when(task.when, ctx):
                continue
            op, args = render.arguments(task, play, ctx)
            operation = OPERATIONS[op]
            keys = operation.requests(operation.check_args(args))
        except NodeFault:
            raise
        except Exception as error:  # noqa: BLE001
            if not later:
                raise bad_input(render.variables, task, host, error) from None
            keys = partial_requests(task, ctx)
        predicted.append(as_reader(keys, reader_of(task, play, ctx)))
    return predicted


def bad_input(variables: Variables, task: Task, host: Host, error: BaseException) -> BadInput:
    """The error of a task's arguments, named where the user wrote the values it refused
    (``hosts.yml:12 (nfs_server)``), and at the task's file:line unless that is provision's
    own playbook (a path inside the install says nothing to a user). A template error (a filter
    refusing a setting, in the arguments or in ``when:``) is named so when its text names one of
    the task's variables (``slurm: controller: ...``)."""
    whens = task.when if isinstance(task.when, list) else [task.when]
    conditions = ["{{ " + w + " }}" for w in whens if isinstance(w, str)]
    names = sorted(names_in([task.args, task.loop, conditions])) if isinstance(error, (ArgumentError, TemplateError)) else []
    named = [name for name in names if re.search(rf"(?<![\w/.-]){re.escape(name)}(?![\w/.-])", str(error))]
    if not named and isinstance(error, ArgumentError):  # an argument's own check may not name its variable
        named = names
    origins = [f"{where} ({name})" for name in named if (where := variables.origin(host, name))]
    if not origins:
        return BadInput(f"{task.where}: task {shown_value(task.name)} on {host.name}: {error}")
    builtin = Path(task.where.rsplit(":", 1)[0]).parent == resource_dir("playbooks")
    at = f"task {shown_value(task.name)}" + ("" if builtin else f" at {task.where}") + f", host {host.name}"
    return BadInput(f"{'; '.join(origins)}: {error} ({at})")


def needed(run: HostRun, keys: list[StateKey], reader: str, as_root: bool) -> tuple[dict, list[StateKey]]:
    """The facts ``keys`` as the operation names them, read as ``reader`` where that matters,
    and those unknown (--check only: a planned change may have altered them)."""
    read = dict(zip(keys, as_reader(keys, reader), strict=True))
    run.need(list(read.values()), as_root)
    view = run.view(list(read.values()))
    unknown = [key for key, real in read.items() if view[real] is UNKNOWN]
    if unknown:  # --check: predict on the state read before the changes planned above
        view = {**view, **run.hints([read[key] for key in unknown])}
    return {key: view[real] for key, real in read.items()}, unknown


# -- 3. decide ---------------------------------------------------------------------------------
def decide(run: HostRun, operation, args: dict, reader: str, as_root: bool, result: TaskResult):
    """The task's changes, decided on facts true now. In --check, where a planned change made
    a fact unknowable, the task is predicted on the state read before it; when that cannot
    decide, it is predicted ``changed`` (as Ansible would) and nothing after it is trusted."""
    current, unknown = needed(run, operation.requests(args), reader, as_root)
    if not unknown:
        return operation.decide(args, current), True
    where = ", ".join(f"{key.kind} {key.arg}".strip()[:60] for key in unknown[:3])
    try:
        changes = operation.decide(args, current)
    except OperationError:
        # A precondition the state as read fails (a path that must exist, a file the task edits,
        # systemd for a service): the real run fails there too unless a change above makes it
        # true, so --check reports the failure it foresees (issue 34), never a success.
        result.detail = f"foreseen on the state read before the changes above ({where})"
        raise
    except Exception as error:  # noqa: BLE001 - on stale facts the real run may well succeed
        run.plan_unknown()
        result.status = "changed"
        result.message = "predicted: decided only when the changes above are applied"
        result.detail = f"{where} unknown now; {error}"
        return [], False
    # Nearly every task after a planned change is predicted so: detail (-v), not a clause on each line.
    result.detail = f"predicted on state read before the changes above ({where})"
    return changes, False


# -- the whole life, once per loop item ----------------------------------------------------------
def perform(
    render: Render, play: Play, task: Task, run: HostRun, notified: list[str] | None, wanted: list[StateKey], diff: bool
) -> None:
    """Run ``task`` on ``run``'s host: each loop item rendered, its state read, decided and its
    changes queued; ``wanted``: the facts the tasks after it are known to need (read in the same
    round trip when it must read). Registers its result; a failure stops the host
    (:class:`HostFailed`) after applying what earlier tasks decided."""
    become = task.become if task.become is not None else play.become
    run.wanted = dict.fromkeys(wanted)
    try:
        items = render.loop_items(task, render.context(run.host, play, run))
    except Exception as error:  # noqa: BLE001
        failed = TaskResult(run.host.name, play.name, task.name, task.where, no_log=task.no_log)
        run.results.append(failed)
        fail(run, failed, error)
    registered = []
    for item in items:
        result = TaskResult(
            run.host.name, play.name, task.name, task.where, item=None if item is NO_ITEM else item, no_log=task.no_log
        )
        run.results.append(result)
        try:
            ctx = render.context(run.host, play, run, item)
            if task.when is not None and not evaluate_when(task.when, ctx):
                result.status = "skipped"
                run.finish(result)
                continue
            op, args = render.arguments(task, play, ctx)
            user = render_value(task.become_user, ctx) if task.become_user else None
            user = check_user(user) if user else None  # a template may render to none: no switch
            operation = OPERATIONS[op]
            args = operation.check_args(args)
            reader = user or ("root" if become else LOGIN_USER)
            changes, exact = decide(run, operation, args, reader, bool(become or user), result)
        except HostFailed:
            result.status, result.message = "aborted", "host stopped"
            run.finish(result)
            raise
        except Exception as error:  # noqa: BLE001 - bad args, render errors, host errors: this task fails
            fail(run, result, error)
        queue(run, result, changes, (become, user), exact, diff)
        if changes or result.status == "changed":
            result.status = "changed"
            if notified is not None:
                notified.extend(task.notify)
        if task.register:
            registered.append(register_value(run, result, item, operation, args, reader, bool(become or user)))
        run.finish(result)
    if task.register:
        run.registered[task.register] = (
            {"results": registered, "changed": any(v["changed"] for v in registered)}
            if task.loop is not None
            else (registered[0] if registered else {})
        )


def queue(run: HostRun, result: TaskResult, changes: list, acting: tuple[bool, str | None], exact: bool, diff: bool) -> None:
    """Step 4: the changes wait on the host, each to run as ``acting`` says (become, become_user),
    and ``result`` tells what they are (a no_log task: that there are some)."""
    for change in changes:
        run.plan(change, result, Step(change, *acting), exact)
        result.changes.append(change.describe if not result.no_log else NO_LOG)
        result.commands.append(ran_text(change, result.no_log))
        if diff and isinstance(change, Write):
            result.diff.append(unified_diff(change, run.host.name) if not result.no_log else NO_LOG)


def register_value(run: HostRun, result: TaskResult, item: Any, operation, args: dict, reader: str, as_root: bool) -> dict:
    """What ``register`` keeps of one loop item: changed, status, the item, and the operation's
    own result (read from the host, after the changes it needs are applied)."""
    value: dict[str, Any] = {"changed": result.status == "changed", "status": result.status}
    if item is not NO_ITEM:
        value["item"] = item
    if operation.result is not None:
        keys = operation.result_requests(args) if operation.result_requests else []
        value.update(operation.result(args, needed(run, keys, reader, as_root)[0]))
    return value


def fail(run: HostRun, result: TaskResult, error: BaseException) -> None:
    """``result`` failed with ``error``: the host applies what earlier tasks decided, then stops."""
    result.status = "failed"
    result.message = f"{type(error).__name__}: {error}" if not isinstance(error, ProvisionError) else str(error)
    run.failed = True
    run.finish(result)
    with contextlib.suppress(HostFailed):
        run.flush()  # what earlier tasks decided is still applied
    raise HostFailed(result.message)
