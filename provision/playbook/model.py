"""Playbooks: an ordered list of plays; a play runs tasks (one operation each) on hosts/groups.

    - name: Cluster users
      hosts: all                # hosts or groups, a list or a comma-separated string
      become: true
      vars: {shell: /bin/bash}
      tasks:
        - name: users
          user: {name: "{{ item.name }}", uid: "{{ item.uid }}"}
          loop: "{{ cluster_users }}"
          when: item.create | default(true)
          tags: [users]
          register: created
          notify: reload something
      handlers:
        - name: reload something
          command: {cmd: "true"}
    - include: other.yml        # another playbook's plays, here (tags: apply to all of them)

Everything is checked when loaded (operation names, argument names, ``when:`` syntax), and every
error names ``file:line``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision.errors import ProvisionError
from provision.operations import OPERATIONS
from provision.operations.base import Arg
from provision.templating import TemplateError, compile_expression
from provision.text import shown_value
from provision.yaml_lines import load_yaml_with_lines

TEMPLATE_DOC = "a Jinja2 template rendered on the controller with the host's variables, written as a file"
TEMPLATE_ARGS = {
    "src": Arg((str,), True, help="template name: --templates DIR, templates/ beside the playbook, then the built-in ones"),
    "path": Arg((str,), True, help="remote path (absolute or ~user/...)"),
    "owner": Arg((str,), help="user that owns it"),
    "group": Arg((str,), help="group that owns it"),
    "mode": Arg((str, int), help="octal mode, e.g. '0644'"),
    "secret": Arg((bool,), default=False, help="a new file is 0600 unless mode says otherwise; --diff does not show its content"),
}
TASK_KEYWORDS = ("name", "when", "loop", "tags", "become", "become_user", "notify", "register", "no_log")
PLAY_KEYWORDS = ("name", "hosts", "become", "vars", "tasks", "handlers", "tags")
MAX_INCLUDE_DEPTH = 8


class PlaybookError(ProvisionError):
    """A malformed playbook; the message starts with ``file:line``."""


def operation_names() -> list[str]:
    """Every operation a task may name (``template`` included)."""
    return sorted([*OPERATIONS, "template"])


def operation_args(op: str) -> dict:
    """The argument spec of operation ``op``."""
    return TEMPLATE_ARGS if op == "template" else dict(OPERATIONS[op].args)


def operation_doc(op: str) -> str:
    """What operation ``op`` makes true on the host, in one line."""
    return TEMPLATE_DOC if op == "template" else OPERATIONS[op].doc


@dataclass(frozen=True)
class Task:
    """One task: an operation with (unrendered) arguments and its keywords."""

    name: str
    op: str
    args: Any
    where: str
    when: Any = None
    loop: Any = None
    tags: tuple[str, ...] = ()
    become: bool | None = None
    notify: tuple[str, ...] = ()
    register: str | None = None
    no_log: bool = False
    become_user: str | None = None


@dataclass(frozen=True)
class Play:
    """Hosts/groups, variables and tasks; ``base`` is the playbook's folder (for templates)."""

    name: str
    hosts: tuple[str, ...]
    where: str
    base: Path
    become: bool = False
    vars: dict = field(default_factory=dict)
    tasks: tuple[Task, ...] = ()
    handlers: tuple[Task, ...] = ()


def _fail(path: Path, line: int | None, message: str) -> PlaybookError:
    return PlaybookError(f"{path}:{line}: {message}" if line else f"{path}: {message}")


def _tags(value: Any, path: Path, line: int) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(t, str) and t.replace("-", "_").isidentifier() for t in items):
        raise _fail(path, line, f"tags must be names, got {shown_value(value)}")
    return tuple(items)


def _task(raw: Any, path: Path, line: int, inherited_tags: tuple[str, ...]) -> Task:
    if not isinstance(raw, dict):
        raise _fail(path, line, "a task is a mapping with a name and one operation")
    lines = getattr(raw, "key_lines", {})
    ops = [key for key in raw if key not in TASK_KEYWORDS]
    for key in ops:
        if key not in OPERATIONS and key != "template":
            raise _fail(
                path,
                lines.get(key, line),
                f"unknown operation or keyword {shown_value(key)} "
                f"(operations: {', '.join(operation_names())}; keywords: {', '.join(TASK_KEYWORDS)})",
            )
    if len(ops) != 1:
        raise _fail(path, line, f"a task names exactly one operation, found {ops or 'none'}")
    op = ops[0]
    args = raw[op]
    if not isinstance(args, dict):
        raise _fail(path, lines.get(op, line), f"{op}: arguments must be a mapping")
    spec = operation_args(op)
    for name in args:
        if name not in spec:
            raise _fail(
                path,
                args.key_lines.get(name, line) if hasattr(args, "key_lines") else line,
                f"{op}: unknown argument {shown_value(name)} (valid: {', '.join(sorted(spec))})",
            )
    for name, arg in spec.items():
        if arg.required and name not in args:
            raise _fail(
                path, lines.get(op, line), f"{op}: missing argument {shown_value(name)} (valid: {', '.join(sorted(spec))})"
            )
    when = raw.get("when")
    for expression in when if isinstance(when, list) else [when]:
        if isinstance(expression, str):
            try:
                compile_expression(expression)
            except TemplateError as error:
                raise _fail(path, lines.get("when", line), f"when: {error}") from None
        elif expression is not None and not isinstance(expression, bool):
            raise _fail(path, lines.get("when", line), f"when: expected an expression, got {shown_value(expression)}")
    notify = raw.get("notify") or ()
    notify = (notify,) if isinstance(notify, str) else tuple(notify)
    register = raw.get("register")
    if register is not None and (not isinstance(register, str) or not register.isidentifier()):
        raise _fail(path, lines.get("register", line), f"register: {shown_value(register)} is not a variable name")
    become = raw.get("become")
    if become is not None and not isinstance(become, bool):
        raise _fail(path, lines.get("become", line), "become: true or false")
    become_user = raw.get("become_user")
    if become_user is not None and (not isinstance(become_user, str) or not become_user.strip()):
        raise _fail(path, lines.get("become_user", line), "become_user: a user name (or a {{ template }})")
    return Task(
        str(raw.get("name") or op),
        op,
        args,
        f"{path}:{line}",
        when,
        raw.get("loop"),
        inherited_tags + _tags(raw.get("tags"), path, lines.get("tags", line)),
        become,
        notify,
        register,
        bool(raw.get("no_log")),
        become_user,
    )


def _hosts(value: Any, path: Path, line: int) -> tuple[str, ...]:
    items = [h.strip() for h in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(h, str) and h for h in items):
        raise _fail(path, line, "hosts: a host, a group, 'all', or a list of them")
    return tuple(items)


def load_playbook(path: Path, _depth: int = 0, _tags_from: tuple[str, ...] = ()) -> list[Play]:
    """Read a playbook (and the ones it includes) into plays; errors say ``file:line``."""
    path = Path(path)
    if _depth > MAX_INCLUDE_DEPTH:
        raise _fail(path, None, f"includes nested deeper than {MAX_INCLUDE_DEPTH} (a loop?)")
    try:
        data = load_yaml_with_lines(path)
    except ProvisionError as error:
        raise PlaybookError(str(error)) from None
    if not isinstance(data, list):
        raise _fail(path, getattr(data, "line", 1), "a playbook is a list of plays")
    plays: list[Play] = []
    for index, raw in enumerate(data):
        line = data.item_lines[index]
        if not isinstance(raw, dict):
            raise _fail(path, line, "a play is a mapping (hosts:, tasks:...) or {include: FILE}")
        lines = raw.key_lines
        if "include" in raw or "import_playbook" in raw:
            target = raw.get("include") or raw.get("import_playbook")
            if not isinstance(target, str) or set(raw) - {"include", "import_playbook", "tags", "name"}:
                raise _fail(path, line, "include: FILE (with optional tags:) only")
            included = (path.parent / target).resolve()
            if not included.is_file():
                raise _fail(path, line, f"include: {target} not found next to {path.name}")
            plays.extend(load_playbook(included, _depth + 1, _tags_from + _tags(raw.get("tags"), path, line)))
            continue
        unknown = [key for key in raw if key not in PLAY_KEYWORDS]
        if unknown:
            raise _fail(
                path,
                lines.get(unknown[0], line),
                f"unknown play keyword {shown_value(unknown[0])} (valid: {', '.join(PLAY_KEYWORDS)})",
            )
        if "hosts" not in raw:
            raise _fail(path, line, "a play needs hosts:")
        tags = _tags_from + _tags(raw.get("tags"), path, lines.get("tags", line))
        variables = raw.get("vars") or {}
        if not isinstance(variables, dict):
            raise _fail(path, lines.get("vars", line), "vars: expected a mapping")

        def task_list(key: str, raw=raw, lines=lines, line=line, tags=tags) -> tuple[Task, ...]:
            items = raw.get(key) or []
            if not isinstance(items, list):
                raise _fail(path, lines.get(key, line), f"{key}: expected a list of tasks")
            return tuple(_task(item, path, items.item_lines[i], tags) for i, item in enumerate(items))

        become = raw.get("become", False)
        if not isinstance(become, bool):
            raise _fail(path, lines.get("become", line), "become: true or false")
        plays.append(
            Play(
                str(raw.get("name") or f"play {index + 1}"),
                _hosts(raw["hosts"], path, lines.get("hosts", line)),
                f"{path}:{line}",
                path.parent,
                become,
                dict(variables),
                task_list("tasks"),
                task_list("handlers"),
            )
        )
        handler_names = {h.name for h in plays[-1].handlers}
        for task in plays[-1].tasks:
            for name in task.notify:
                if name not in handler_names:
                    raise _fail(
                        path, int(task.where.rsplit(":", 1)[1]), f"notify: no handler named {shown_value(name)} in this play"
                    )
    return plays
