"""The data files of fact and operation cases (``tests/facts/<fact>/*.json``,
``tests/operations/<operation>/*.json``): a file holds one case or a list of them; a fact's value
in a case is decoded by the type its declaration gives (:func:`decoded`)."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any


def cases(folder: Path) -> list[tuple[str, dict]]:
    """``[(id, case)]`` of every JSON file below ``folder`` (a file: one case or a list)."""
    found = []
    for path in sorted(folder.glob("*/*.json")):
        loaded = json.loads(path.read_text())
        for number, case in enumerate(loaded if isinstance(loaded, list) else [loaded]):
            found.append(
                (f"{path.parent.name}/{path.stem}#{number}:{case.get('case', '')}", {**case, "folder": path.parent.name})
            )
    return found


def decoded(fact, value: Any) -> Any:
    """The value of ``fact`` from its JSON form in a case, by the type the fact's parser declares
        (its return annotation: a dataclass from its fields, tuples from lists, bytes from text);
        nothing is kept per fact here, so a new fact needs no entry. Fields a case leaves out take the
        dataclass's defaults; a number written as text is octal (a mode, as chmod reads it), except a
    mapping's key (JSON writes every key as text: a decimal number there)."""
    return _as(typing.get_type_hints(fact.parse)["return"], value)


def _as(hint: Any, value: Any) -> Any:
    if value is None or hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for choice in (a for a in args if a is not type(None)):
            if _fits(choice, value):
                return _as(choice, value)
        raise ValueError(f"{value!r} is none of {hint}")
    if dataclasses.is_dataclass(hint):
        fields = typing.get_type_hints(hint)
        unknown = set(value) - set(fields)
        assert not unknown, f"{hint.__name__} has no field {sorted(unknown)}"
        return hint(**{name: _as(fields[name], item) for name, item in value.items()})
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_as(args[0], item) for item in value)
        return tuple(_as(kind, item) for kind, item in zip(args, value, strict=True))
    if origin is list:
        return [_as(args[0], item) for item in value]
    if origin is dict:
        # JSON writes every key as text: a number's in decimal
        return {(int(key) if args[0] is int else _as(args[0], key)): _as(args[1], item) for key, item in value.items()}
    if hint is bytes:
        return value.encode()
    if hint is int and isinstance(value, str):  # "0644", "1777": a mode, octal as chmod reads it
        return int(value, 8)
    return value


def _fits(hint: Any, value: Any) -> bool:
    """Whether JSON ``value`` can be a ``hint`` (a union's member is chosen by the JSON type)."""
    origin = typing.get_origin(hint) or hint
    if dataclasses.is_dataclass(hint) or origin is dict:
        return isinstance(value, dict)
    if origin in (tuple, list):
        return isinstance(value, list)
    if hint is bool:
        return isinstance(value, bool)
    if hint in (int, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (str, bytes):
        return isinstance(value, str)
    return True
