"""``fact``: read one fact of the registry on the host, by its name, and register its value for the
next tasks; it never changes anything (pyinfra's ``host.get_fact``, Ansible's ``setup`` with a
filter). Any fact: a probe fact such as ``uname-r`` or ``uname-m`` (no ``arg``), a fact of one
thing with its ``arg`` (``file`` and a path, ``user`` and a name, ``sysctl`` and a key).

    - name: the running kernel
      fact: {name: uname-r}
      register: kernel
    - name: what runs where, for the users
      file: {path: /etc/provision-kernel, content: "{{ kernel.value }}\\n", mode: "0644"}
      when: kernel.value is not none

The value is registered as JSON would hold it (a record as a mapping of its fields, a list for a
tuple); ``None`` where the fact is absent on the host (no such file; a tool the fact needs is
not installed). The fact's name and argument are checked before any command runs on a host; a path
that is a link or below a folder another user can write is refused, as for every operation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from provision.errors import ArgumentError
from provision.facts.registry import fact
from provision.operations.base import Arg, Operation, StateKey
from provision.text import shown_value


def _key(args: dict) -> StateKey:
    """The fact asked for, its name and argument checked (ArgumentError: unknown, or a wrong argument)."""
    name, arg = args["name"], args["arg"] or ""
    try:
        found = fact(name)
    except KeyError:
        raise ArgumentError(f"fact: no fact is named {shown_value(name)} (provision/facts/, the reference lists them)") from None
    if found.takes_arg and not arg:
        raise ArgumentError(f"fact: {name} is read for one thing: give its arg")
    try:
        found.state_command(arg)  # the fact's own check of its argument, before any host
    except ValueError as error:
        raise ArgumentError(f"fact: {name}: {error}") from None
    return StateKey(name, arg)


def _requests(args: dict) -> list[StateKey]:
    return [_key(args)]


def _plan(_args: dict, _current: Mapping[StateKey, Any]) -> list:
    """Nothing to change: the fact is only read."""
    return []


def plain(value: Any) -> Any:
    """``value`` as JSON holds it: a dataclass as a mapping of its fields, a tuple as a list, bytes
    as text (invalid UTF-8 replaced)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _result(args: dict, current: Mapping[StateKey, Any]) -> dict:
    """``{"value": ...}``: what the host holds now."""
    return {"value": plain(current.get(_key(args)))}


OPERATIONS = {
    "fact": Operation(
        "fact",
        {
            "name": Arg((str,), True, help="the fact's name (probe's capture name, or a state kind such as file)"),
            "arg": Arg((str,), default="", help="what a fact of one thing is read for (a path, a user, a key)"),
        },
        _requests,
        _plan,
        result=_result,
        result_requests=_requests,
        doc="read a fact on the host and register its value (changes nothing)",
    )
}
