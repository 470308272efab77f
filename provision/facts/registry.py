"""The fact registry: every fact provision reads from a node, declared once, next to its parser.

A :class:`Fact` is pyinfra's fact model: the POSIX sh that prints it (``command``) and a pure
parser of that output (``parse``), with the tools it needs and one line saying what it is for.
Declaring it registers it under its name, so probe (:mod:`provision.probe.gather`), doctor
(:mod:`provision.doctor.sources`) and setup-cluster's state reads (:class:`StateKey` kinds,
:mod:`provision.operations.state`) find it in one place, and the tests enumerate it.

Two shapes, one class:

- a fixed fact (probe's and doctor's captures): ``command`` is a constant string (never a user
  value), ``parse(text)`` gives its value;
- a fact of one thing (setup-cluster's state: a file, a user, a sysctl key): ``command(arg)``
  returns the sh for ``arg`` (quoted; checked first), ``parse(arg, text)`` its value.

Example::

    >>> SWAP = Fact("swaps", (), "cat /proc/swaps", "swap devices", parse=lambda text: text.count("/dev/"))
    >>> SWAP.read("Filename Type\\n/dev/sda2 partition\\n")
    1

Node output is hostile: a parser raises :class:`provision.errors.ParseError` on anything its
command cannot print. This module imports nothing of provision's, so every layer can use it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FACTS: dict[str, Fact] = {}  # name -> fact, in declaration order


@dataclass(frozen=True, eq=False)
class Fact:
    """One fact: ``name`` (its capture file name or state kind), the tools it ``needs`` (a missing
    one gives exit 127: "not installed" is a normal answer), the sh ``command`` (a constant, or a
    function of the fact's argument), what it is for (``describe``) and its pure ``parse``r."""

    name: str
    needs: tuple[str, ...]
    command: str | Callable[[str], str]
    describe: str
    parse: Callable[..., Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.name in FACTS:
            raise RuntimeError(f"fact {self.name!r} is declared twice")
        FACTS[self.name] = self

    def __str__(self) -> str:
        return self.name

    @property
    def takes_arg(self) -> bool:
        """Whether the fact is read for one thing (a path, a user, a key) named by an argument."""
        return callable(self.command)

    def command_for(self, arg: str = "") -> str:
        """The sh that prints the fact (for ``arg`` when it takes one)."""
        return self.command(arg) if callable(self.command) else self.command

    def read(self, text: str, arg: str = "") -> Any:
        """The fact's value from its command's output."""
        if self.parse is None:
            raise TypeError(f"fact {self.name!r} has no parser")
        return self.parse(arg, text) if self.takes_arg else self.parse(text)

    def parses(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: ``function`` is this fact's parser (declared below the fact, beside it)."""
        object.__setattr__(self, "parse", function)
        return function


def discover(*packages: str) -> dict[str, Fact]:
    """Import every module of ``packages`` (default: ``provision.facts``) so that each fact they
    declare is registered; the registry. Tests call it to enumerate every fact; a run imports
    only the modules it uses."""
    for package in packages or ("provision.facts",):
        root = importlib.import_module(package)
        for module in pkgutil.walk_packages(root.__path__, f"{package}."):
            importlib.import_module(module.name)
    return FACTS
