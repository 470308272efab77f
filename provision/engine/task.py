"""A task's life on one host, in the order it happens (pyinfra v3: a task is decided when reached).
:func:`perform` takes a task through all six steps; each is a function here or names the module
that does it for a whole host at once:

1. **render** its variables, loop items and arguments (a template becomes a ``file`` with its
   content): :class:`provision.engine.render.Render`;
2. **read** the facts its operation asks for, each as the task's reader (:func:`needed`): the
   host reads what it does not trust (:meth:`HostRun.need <provision.engine.hostrun.HostRun.need>`;
   what is trusted, and until when: :mod:`provision.engine.statecache`), after applying the
   pending changes first, in one framed round trip (:func:`provision.engine.script.build_script`;
   each fact's command and parser: the registry, :func:`provision.operations.state.parse_state`);
3. **decide** the changes on those facts as they are now (:func:`decide`:
   :meth:`Operation.decide <provision.operations.base.Operation.decide>`, pure);
4. **diff**: what a file change does to the file, for ``--diff`` (:func:`unified_diff`, secrets
   masked), and the commands ``-v`` shows;
5. **apply**: the changes wait on the host (:func:`queue`, :meth:`HostRun.plan
   <provision.engine.hostrun.HostRun.plan>`) and go in its next round trip (when a later task
   needs a fact they may alter, or at the play's end: :meth:`HostRun.flush
   <provision.engine.hostrun.HostRun.flush>`), each as its acting user
   (:mod:`provision.engine.acting`: root never acts in a user's home), stopped at the first that
   fails;
6. **verify**: each applied change's exit status and output become its result
   (``HostRun._verify``; a failure stops the host), reported in task order once final; after the
   whole run, setup-cluster checks what the roles did, across nodes
   (:mod:`provision.checks.roles`, :mod:`provision.checks.ssh_pairs`, from
   :meth:`provision.cluster_setup.ClusterSetup.run`).

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
import difflib
from typing import Any

from provision.engine.hostrun import NO_LOG, HostFailed, HostRun, TaskResult
from provision.engine.render import NO_ITEM, Render, bad_input, names_in
from provision.engine.script import Step
from provision.engine.verbosity import ran_text
from provision.errors import NodeFault, ProvisionError
from provision.inventory.model import Host, check_user
from provision.operations import OPERATIONS
from provision.operations.base import UNKNOWN, OperationError, StateKey, Write, check_path, mask_secrets
from provision.operations.paths import LOGIN_USER
from provision.playbook.model import Play, Task
from provision.templating import evaluate_when, render_value


def becomes(task: Task, play: Play) -> bool:
    """Whether the task runs as root or as another user (its round trips run through sudo)."""
    return bool((task.become if task.become is not None else play.become) or task.become_user)


# -- 2. read: the facts needed, as whom ------------------------------------------------------
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
    """Steps 1-2 before any command runs on a host: the facts of each loop item the task will run
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
    """Take ``task`` through its life on ``run``'s host (see the module): each loop item rendered,
    its state read, decided, its changes diffed and queued for the next round trip, which applies
    and verifies them; ``wanted``: the facts the tasks after it are known to need (read in the
    same round trip when it must read). Registers its result; a failure stops the host
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
            op, args = render.arguments(task, play, ctx)  # 1. render
            user = render_value(task.become_user, ctx) if task.become_user else None
            user = check_user(user) if user else None  # a template may render to none: no switch
            operation = OPERATIONS[op]
            args = operation.check_args(args)
            reader = user or ("root" if become else LOGIN_USER)
            changes, exact = decide(run, operation, args, reader, bool(become or user), result)  # 2. read, 3. decide
        except HostFailed:
            result.status, result.message = "aborted", "host stopped"
            run.finish(result)
            raise
        except Exception as error:  # noqa: BLE001 - bad args, render errors, host errors: this task fails
            fail(run, result, error)
        queue(run, result, changes, (become, user), exact, diff)  # 4. diff, 5. apply (6. verified when applied)
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


# -- 4. diff, 5. apply ---------------------------------------------------------------------------
def unified_diff(change: Write, host: str | None = None) -> str:
    """The unified diff of a file change, secrets masked (or hidden entirely for secret files);
    the headers name ``host`` (``--- w1:/etc/hosts (before)``) when given."""
    path = f"{host}:{change.path}" if host else change.path
    if change.secret and change.mask is None:
        return f"--- {path}\n+++ {path}\n(content hidden: secret)\n"
    shown = change.mask or (lambda text: text)  # a secret file with a mask: its secret lines hidden, the rest shown
    try:
        old = shown((change.old or b"").decode()).splitlines(keepends=True)
        new = shown(change.content.decode()).splitlines(keepends=True)
    except UnicodeDecodeError:
        return f"--- {path}\n+++ {path}\n(binary content differs)\n"
    if old == new and change.old != change.content:  # the mask hid both sides whole: say so, not an empty diff
        return f"--- {path}\n+++ {path}\n(content hidden: secret)\n"
    lines = difflib.unified_diff(old, new, f"{path} (before)" if change.old is not None else "/dev/null", path)
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return text if change.mask else mask_secrets(text)  # a file's own mask knows its secret lines


def queue(run: HostRun, result: TaskResult, changes: list, acting: tuple[bool, str | None], exact: bool, diff: bool) -> None:
    """Steps 4 and 5: ``result`` tells what the changes are (a no_log task: that there are some;
    ``diff``: each file change's diff), and they wait on the host, each to run as ``acting`` says
    (become, become_user), until its next round trip applies them (:meth:`HostRun.flush`)."""
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
