"""What state a task needs, and as whom: the variables its templates use (deferred ones are
known only while running), the state keys of a task whose arguments are only partly known yet, and
the reader of its own checks (``unless`` runs as the task's user)."""

from __future__ import annotations

import dataclasses
from typing import Any

from provision.engine.script import LOGIN_USER
from provision.operations import OPERATIONS
from provision.operations.base import StateKey, check_path, check_user
from provision.playbook.model import Play, Task
from provision.templating import render_value, variables_in


def names_in(value: Any) -> set[str]:
    """The top-level variable names the templates inside ``value`` (dicts and lists walked) use."""
    if isinstance(value, dict):
        return set().union(*(names_in(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(names_in(v) for v in value)) if value else set()
    return variables_in(value) if isinstance(value, str) else set()


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
    """``command`` facts run as the task's user; other facts are read as the round trip's."""
    return [dataclasses.replace(key, user=reader) if key.kind == "command" and reader else key for key in keys]
