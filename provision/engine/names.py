"""Variable names the playbook reads, and the user's names that look like a typo of one.

A variable a role never reads does nothing, silently: ``nfs_export: [...]`` (one letter short of
``nfs_exports``) leaves the NFS role idle. A name the playbook (its tasks and the templates they
render) never reads, one edit away from a name it does read, is refused before any host is
touched, with the file:line that holds it and the name it probably meant:

    >>> one_edit_apart("nfs_export", "nfs_exports"), one_edit_apart("nfs_server", "nfs_clients")
    (True, False)

The same holds inside the entries of the roles' lists (``cluster_users``, ``nfs_exports``,
``anaconda``), more strictly: a key no role declares (``playbooks/role-variables.yml``) and no
task of the user's own playbook reads is refused, whatever it looks like (``conda_clonee: true``
would leave her Jupyter in the shared prefix; ``jupyter_prot`` would skip her Jupyter).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from provision.engine.render import names_in
from provision.inventory.model import Host
from provision.playbook.model import Play
from provision.playbook.variables import VariableError, Variables
from provision.resources import resource_dir
from provision.templating import fields_in, variables_in

# The roles' variables that are lists of mappings: their entries' keys are checked (ENTRY_KEYS).
LIST_VARIABLES = ("cluster_users", "nfs_exports", "anaconda")


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


def declared_fields() -> dict[str, set[str]]:
    """The keys each entry of a :data:`LIST_VARIABLES` list may hold, as the roles declare them
    (``cluster_users[].uid`` in ``playbooks/role-variables.yml``)."""
    from provision.playbook.role_variables import load_roles

    fields: dict[str, set[str]] = {name: set() for name in LIST_VARIABLES}
    for role in load_roles().values():
        for variable in role.variables:
            head, sep, field = variable.partition("[].")
            if sep and head in fields:
                fields[head].add(field)
    return fields


def _strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def own_fields(plays: Iterable[Play], template_dirs: Iterable[Path]) -> set[str]:
    """The attribute names the user's own plays (not provision's shipped roles) and their
    templates read: the fields an own playbook may give the roles' list entries."""
    shipped = resource_dir("playbooks")
    names: set[str] = set()
    for play in plays:
        if play.base == shipped:
            continue
        for task in (*play.tasks, *play.handlers):
            whens = task.when if isinstance(task.when, list) else [task.when]
            texts = [
                *_strings([task.args, task.loop, task.become_user]),
                *("{{ " + w + " }}" for w in whens if isinstance(w, str)),
            ]
            for text in texts:
                names |= fields_in(text)
    for folder in template_dirs:
        if Path(folder) == resource_dir("templates"):
            continue
        for path in sorted(Path(folder).glob("*.j2")):
            names |= fields_in(path.read_text(errors="replace"))
    return names


def _suggestion(key: str, known: set[str]) -> str:
    import difflib

    close = sorted(k for k in known if one_edit_apart(key, k)) or difflib.get_close_matches(key, sorted(known), 2, 0.75)
    if close:
        return f"did you mean {' or '.join(close)}?"
    return f"known: {', '.join(sorted(known))}"


def check_entry_keys(variables: Variables, hosts: Iterable[Host], extra_fields: set[str] = frozenset()) -> None:
    """Raise :class:`VariableError` for the first key of a ``cluster_users``, ``nfs_exports`` or
    ``anaconda`` entry that no role declares and ``extra_fields`` (what the user's own playbook
    reads) does not hold, at its file:line, with the key it probably meant:
    ``hosts.yml:14: cluster_users[1] (alice): unknown key conda_clonee; did you mean conda_clone?``"""
    declared = declared_fields()
    seen: set[int] = set()
    for host in hosts:
        layers = [(where, data) for where, data, _lines in variables.origins(host)] + [("-e", variables.extra)]
        for where, data in layers:
            for name in LIST_VARIABLES:
                entries = data.get(name)
                if not isinstance(entries, list) or id(entries) in seen:
                    continue
                seen.add(id(entries))
                known = declared[name] | set(extra_fields)
                for index, entry in enumerate(entries):
                    if not isinstance(entry, dict):
                        continue  # the role's own check says what an entry must be
                    for key in entry:
                        if key in known:
                            continue
                        line = getattr(entry, "key_lines", {}).get(key)
                        at = f"{where}:{line}" if line else where
                        label = f" ({entry['name']})" if isinstance(entry.get("name"), str) else ""
                        raise VariableError(
                            f"{at}: {name}[{index}]{label}: unknown key {key}; {_suggestion(str(key), declared[name])}"
                        )
