"""Variable names the playbook reads, and the user's names that look like a typo of one.

A variable a role never reads does nothing, silently: ``nfs_export: [...]`` (one letter short of
``nfs_exports``) leaves the NFS role idle. A name the playbook (its tasks and the templates they
render) never reads, one edit away from a name it does read, is refused before any host is
touched, with the file:line that holds it and the name it probably meant:

    >>> one_edit_apart("nfs_export", "nfs_exports"), one_edit_apart("nfs_server", "nfs_clients")
    (True, False)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from provision.engine.task import names_in
from provision.inventory.model import Host
from provision.playbook.model import Play
from provision.playbook.variables import VariableError, Variables
from provision.templating import variables_in


def one_edit_apart(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by one inserted, removed or changed letter, or two swapped ones."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        )
    short, long = sorted((a, b), key=len)
    i = next((i for i, (x, y) in enumerate(zip(short, long, strict=False)) if x != y), len(short))
    return short[i:] == long[i + 1 :]


def read_names(plays: Iterable[Play], template_dirs: Iterable[Path]) -> set[str]:
    """Every top-level variable the plays' tasks (arguments, loops, conditions) and the
    templates in ``template_dirs`` read, and the variables the plays set themselves."""
    names: set[str] = set()
    for play in plays:
        names |= set(play.vars)
        for task in (*play.tasks, *play.handlers):
            whens = task.when if isinstance(task.when, list) else [task.when]
            names |= names_in([task.args, task.loop, task.become_user, *("{{ " + w + " }}" for w in whens if isinstance(w, str))])
            if task.register:
                names.add(task.register)
    for folder in template_dirs:
        for path in sorted(Path(folder).glob("*.j2")):
            names |= variables_in(path.read_text(errors="replace"))
    return names


def check_near_misses(variables: Variables, hosts: Iterable[Host], known: set[str]) -> None:
    """Raise :class:`VariableError` for the first user variable that no task reads and that is
    one edit away from one that a task reads (``file:line: nfs_export ...: did you mean nfs_exports?``)."""
    seen: set[tuple[str, str]] = set()
    for host in hosts:
        for where, data, lines in variables.origins(host):
            for name in data:
                if name in known or (where, name) in seen:
                    continue
                seen.add((where, name))
                close = sorted(k for k in known if one_edit_apart(name, k))
                if close:
                    at = f"{where}:{lines[name]}" if lines.get(name) else where
                    raise VariableError(
                        f"{at}: variable {name} is read by no task of the playbook; did you mean {' or '.join(close)}?"
                    )
