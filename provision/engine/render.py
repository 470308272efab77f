"""Step 1 of a task's life (:mod:`provision.engine.task`): **render** its variables, its loop items
and its arguments for one host (a template becomes a ``file`` with its content), and name where
the user wrote a value an operation refuses (:func:`bad_input`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provision.engine.selection import BadInput
from provision.errors import ArgumentError, TemplateError
from provision.inventory.model import Host
from provision.playbook.model import Play, Task
from provision.playbook.variables import Variables
from provision.resources import resource_dir
from provision.templating import render_template, render_value, template_loader, variables_in
from provision.text import shown_value

if TYPE_CHECKING:
    from provision.engine.hostrun import HostRun

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
        """Variables for one task on one host (``run`` None: before any command runs on a host)."""
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
