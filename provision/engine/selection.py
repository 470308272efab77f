"""Which tasks and hosts a run takes, as ``ansible-playbook`` decides it, checked before any host
is touched: ``--tags``/``--skip-tags`` (a tag no task has is refused, listing the tags),
``--start-at-task`` (a name or glob no task has is refused, listing the tasks), and the outline
that ``--list-hosts``/``--list-tasks``/``--list-tags`` print. Pure: plays in, answers out."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

from provision.errors import ProvisionError
from provision.inventory.patterns import name_list
from provision.playbook.model import Play, Task
from provision.text import shown_value

SPECIAL_TAGS = ("all", "always", "tagged", "untagged")  # Ansible's; `always` runs unless skipped by name
_MAX_LISTED = 20


class BadInput(ProvisionError):
    """Input that fails before any command runs on a host (exit status 2)."""


def playbook_tags(plays: list[Play]) -> list[str]:
    """Every tag a task of ``plays`` has, sorted."""
    return sorted({tag for play in plays for task in play.tasks for tag in task.tags})


def split_tags(text: str | None) -> frozenset[str] | None:
    """``"users, ssh"`` -> ``{"users", "ssh"}``; None stays None (no selection)."""
    return None if text is None else frozenset(t.strip() for t in text.split(",") if t.strip())


def check_tags(plays: list[Play], tags: frozenset[str] | None, option: str) -> None:
    """Refuse a tag no task has (a typo would silently run nothing, or skip nothing)."""
    if tags is None:
        return
    known = playbook_tags(plays)
    unknown = sorted(tags - set(known) - set(SPECIAL_TAGS))
    if unknown or not tags:
        raise BadInput(
            f"{option} {','.join(unknown) or shown_value('')}: no task has {'these tags' if len(unknown) > 1 else 'this tag'} "
            f"(tags: {', '.join(known) or 'none'}; also {', '.join(SPECIAL_TAGS)})"
        )


def _matches(task_tags: set[str], selection: frozenset[str]) -> bool:
    return (
        "all" in selection
        or bool(task_tags & selection)
        or ("tagged" in selection and bool(task_tags))
        or ("untagged" in selection and not task_tags)
    )


def tag_selected(task: Task, tags: frozenset[str] | None, skip_tags: frozenset[str]) -> bool:
    """Whether --tags/--skip-tags select ``task`` (tag ``always`` runs unless skipped by name)."""
    task_tags = set(task.tags)
    if skip_tags and _matches(task_tags, skip_tags):
        return False
    return tags is None or "always" in task_tags or _matches(task_tags, tags)


def tasks_before(plays: list[Play], start_at: str | None) -> set[int]:
    """``id()`` of the tasks --start-at-task skips: those before the first task whose name is
    ``start_at`` (or matches it as a glob). None: skip nothing; no such task: refused."""
    if start_at is None:
        return set()
    skipped: set[int] = set()
    for play in plays:
        for task in play.tasks:
            if task.name == start_at or fnmatch.fnmatchcase(task.name, start_at):
                return skipped
            skipped.add(id(task))
    names = [shown_value(name) for name in dict.fromkeys(task.name for play in plays for task in play.tasks)]
    shown = name_list(names, _MAX_LISTED)
    raise BadInput(f"--start-at-task {shown_value(start_at)}: no task has this name (tasks: {shown}; see --list-tasks)")


def _tag_text(tags) -> str:
    return "[" + ", ".join(sorted(set(tags))) + "]"


def outline(
    source: str,
    plays: list[Play],
    play_hosts: list[list[str]],
    selected: Callable[[Task], bool],
    *,
    hosts: bool = False,
    tasks: bool = False,
    tags: bool = False,
) -> list[str]:
    """The lines ``--list-hosts``, ``--list-tasks`` and ``--list-tags`` print (as
    ansible-playbook does): per play its hosts, the tasks the run would take, their tags."""
    lines = [f"playbook: {source}", ""]
    every_tag: set[str] = set()
    for number, (play, names) in enumerate(zip(plays, play_hosts, strict=True), start=1):
        chosen = [task for task in play.tasks if selected(task)]
        play_tags = set.intersection(*(set(t.tags) for t in play.tasks)) if play.tasks else set()
        lines.append(f"  play #{number} ({', '.join(play.hosts)}): {play.name}\tTAGS: {_tag_text(play_tags)}")
        if hosts:
            lines.append(f"    pattern: {list(play.hosts)}")
            lines.append(f"    hosts ({len(names)}):")
            lines.extend(f"      {name}" for name in names)
        if tasks:
            lines.append("    tasks:")
            lines.extend(f"      {task.name}\tTAGS: {_tag_text(task.tags)}" for task in chosen)
        if tags:
            task_tags = {tag for task in chosen for tag in task.tags}
            every_tag |= task_tags
            lines.append(f"      TASK TAGS: {_tag_text(task_tags)}")
        lines.append("")
    if tags:
        lines.append(f"  ALL TAGS: {_tag_text(every_tag)}")
    return lines
