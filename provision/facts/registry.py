"""The fact registry: every fact provision reads from a node, declared once, next to its parser.

A :class:`Fact` is pyinfra's fact model: the POSIX sh that prints it (``command``) and a pure
parser of that output (``parse``), with the tools it needs and one line saying what it is for.
The same declaration says how the rest of provision uses it, so nothing else names it:

- ``provision probe`` runs every fixed fact of ``provision/facts/`` (:func:`probe_facts`, in a
  fixed order: by module, then as declared); one declared with a ``column`` is kept as parsed in
  :attr:`HostFacts.kept <provision.facts.model.HostFacts.kept>` (its JSON, the facts folder) and
  shown in probe's table under that heading, ``shown`` making the cell;
- ``provision doctor`` runs probe's facts and its own (:mod:`provision.doctor.sources`); a kept
  fact declared ``compared="software"`` or ``"hardware"`` is compared across nodes in that
  check, a node that differs from the others earning ``differ`` (``"fail"`` or ``"warn"``);
- ``setup-cluster`` reads any fact by name: a :class:`StateKey(kind, arg)
  <provision.operations.base.StateKey>` is the fact named ``kind`` (:func:`fact`); one declared
  ``stable`` is read once per run (no change of a run alters it); one declared ``path`` (its
  argument a path on the node) is read behind the walk of the folders above it.

Two shapes, one class:

- a fixed fact: ``command`` is a constant string (never a user value), ``parse(text)`` gives its
  value; read by probe, doctor and setup-cluster alike (a setup-cluster read has no argument);
- a fact of one thing (setup-cluster's state: a file, a user, a sysctl key): ``command(arg)``
  returns the sh for ``arg`` (quoted; checked first), ``parse(arg, text)`` its value.

Where a fact is declared, and why the registry finds it whatever was imported before: a fact lives
in ``provision/facts/`` (the registry imports every module there itself, :func:`registered`), or,
when its command needs the checks of a higher layer, in ``provision/operations/`` (that package
imports all its modules) or ``provision/doctor/sources.py`` (doctor's own, imported by its
runner); those are read only from their own layer up. ``tests/test_fact_registry.py`` keeps it so.

Example::

    >>> SWAP = Fact("swaps-example", (), "cat /proc/swaps", "swap devices", parse=lambda text: text.count("/dev/"))
    >>> SWAP.read("Filename Type\\n/dev/sda2 partition\\n")
    1
    >>> del FACTS["swaps-example"]

Node output is hostile: a parser raises :class:`provision.errors.ParseError` on anything its
command cannot print. This module imports only provision's base layer, so every layer can use it.
"""

from __future__ import annotations

import importlib
import itertools
import pkgutil
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from provision.errors import ParseError
from provision.text import shown_value

FACTS: dict[str, Fact] = {}  # name -> fact, as declared so far (see registered() for all of them)
HOME = "provision.facts"  # the package whose every module the registry imports itself
CHECKS = ("software", "hardware")  # doctor's checks that compare kept facts across nodes
DIFFER = ("fail", "warn")  # what a node whose value differs from the others earns there
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")  # a capture file name, a state kind
_INSTALLED, _MISSING = "installed", "not-installed"  # a state read's first line, for a fact that needs tools
_declared = itertools.count()
_discovered: set[str] = set()  # packages whose modules are all imported (importlib locks each one)
_ordered: tuple[tuple[str, ...], dict[str, Fact]] = ((), {})  # registered()'s last answer, by the names it had


@dataclass(frozen=True, eq=False)
class Fact:
    """One fact: ``name`` (its capture file name or state kind), the tools it ``needs`` (a missing
    one gives exit 127: "not installed" is a normal answer), the sh ``command`` (a constant, or a
    function of the fact's argument), what it is for (``describe``) and its pure ``parse``r; then,
    each optional, how probe keeps and shows it (``column``, ``shown``), how doctor compares it
    (``compared``, ``differ``), whether setup-cluster may trust it for a whole run (``stable``) and
    whether its argument is a path on the node (``path``)."""

    name: str
    needs: tuple[str, ...]
    command: str | Callable[[str], str]
    describe: str
    parse: Callable[..., Any] | None = field(default=None, repr=False)
    column: str = ""  # kept in HostFacts.kept and shown in probe's table under this heading
    shown: Callable[[Any], str] = field(default=str, repr=False)  # a kept value as a cell and in doctor's lines
    compared: str = ""  # "software" or "hardware": doctor's check that wants it alike on every node
    differ: str = "fail"  # what a node that differs from the others earns in that check
    stable: bool = False  # no change of a setup-cluster run alters it: read once, trusted all run
    # Its argument is a path on the node: setup-cluster reads it behind the walk of the folders
    # above the path (provision.operations.paths), and a change that names the paths it touches
    # leaves the facts of other paths trusted.
    path: bool = False
    module: str = field(init=False, repr=False)  # the module that declares it
    position: int = field(init=False, repr=False)  # its place among the facts declared

    def __post_init__(self) -> None:
        problem = _declaration_problem(self)
        if problem:
            raise ValueError(f"fact {self.name!r}: {problem}")
        if self.name in FACTS:
            raise RuntimeError(f"fact {self.name!r} is declared twice")
        # The declaring module, as collections.namedtuple finds it: the caller of the generated __init__.
        object.__setattr__(self, "module", sys._getframe(2).f_globals.get("__name__", ""))
        object.__setattr__(self, "position", next(_declared))
        FACTS[self.name] = self

    def __str__(self) -> str:
        return self.name

    @property
    def takes_arg(self) -> bool:
        """Whether the fact is read for one thing (a path, a user, a key) named by an argument."""
        return callable(self.command)

    @property
    def kept(self) -> bool:
        """Whether probe keeps its parsed value in the host's facts (it has a ``column``)."""
        return bool(self.column)

    def command_for(self, arg: str = "") -> str:
        """The sh that prints the fact (for ``arg`` when it takes one; a fixed fact takes none)."""
        if callable(self.command):
            return self.command(arg)
        if arg:
            raise ValueError(f"fact {self.name} takes no argument (got {shown_value(arg[:60])})")
        return self.command

    def read(self, text: str, arg: str = "") -> Any:
        """The fact's value from its command's output."""
        if self.parse is None:
            raise TypeError(f"fact {self.name!r} has no parser")
        return self.parse(arg, text) if self.takes_arg else self.parse(text)

    def state_command(self, arg: str = "") -> str:
        """The sh of a setup-cluster state read: :meth:`command_for`, behind a first line saying
        whether the tools it ``needs`` are installed (``probe`` learns that from exit code 127)."""
        command = self.command_for(arg)
        if not self.needs:
            return command
        tools = " && ".join(f"command -v {tool} >/dev/null 2>&1" for tool in self.needs)
        return f"if {tools}; then echo {_INSTALLED}; {{ {command}\n}}; else echo {_MISSING}; fi"

    def read_state(self, text: str, arg: str = "") -> Any:
        """The value of a state read (:meth:`state_command`'s output): None where a tool it needs
        is not installed."""
        if not self.needs:
            return self.read(text, arg)
        first, _, rest = text.partition("\n")
        if first == _MISSING:
            return None
        if first != _INSTALLED:
            raise ParseError(self.name, f"unexpected first line {shown_value(first[:40])} ({_INSTALLED} or {_MISSING})")
        return self.read(rest, arg)

    def parses(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: ``function`` is this fact's parser (declared below the fact, beside it)."""
        object.__setattr__(self, "parse", function)
        return function


def _declaration_problem(fact: Fact) -> str:
    """What is wrong with a declaration ("" when nothing): each use it declares must be possible."""
    if not _NAME.fullmatch(fact.name):
        return "a fact name is letters, digits and ._+- (it names a capture file)"
    if fact.path and not fact.takes_arg:
        return "a fact of a path takes the path as its argument"
    if fact.column and fact.takes_arg:
        return "only a fixed fact can be kept by probe (a column)"
    if fact.compared and not fact.column:
        return "doctor compares what probe keeps: give it a column"
    if fact.compared not in ("", *CHECKS):
        return f"compared must be one of {CHECKS}"
    if fact.differ not in DIFFER:
        return f"differ must be one of {DIFFER}"
    return ""


def discover(*packages: str) -> dict[str, Fact]:
    """Import every module of ``packages`` (default: ``provision.facts``) once, so that each fact
    they declare is registered; the registry (:data:`FACTS`)."""
    for package in packages or (HOME,):
        if package in _discovered:
            continue
        root = importlib.import_module(package)
        for module in pkgutil.walk_packages(root.__path__, f"{package}."):
            importlib.import_module(module.name)
        _discovered.add(package)
    return FACTS


def registered() -> dict[str, Fact]:
    """Every fact: all of ``provision/facts/`` (imported here) and those of the higher layers
    imported so far (see the module's docstring), ordered by module, then as declared."""
    global _ordered
    discover(HOME)
    names = tuple(FACTS)
    if names != _ordered[0]:  # sorted again only when a fact was declared since (probe asks per host)
        _ordered = (names, {f.name: f for f in sorted(FACTS.values(), key=lambda f: (f.module, f.position))})
    return dict(_ordered[1])


def fact(name: str) -> Fact:
    """The fact named ``name``; KeyError when none is declared."""
    found = FACTS.get(name)
    if found is None:
        found = registered()[name]
    return found


def probe_facts() -> tuple[Fact, ...]:
    """What ``provision probe`` runs: every fixed fact of ``provision/facts/``, in registry order."""
    return tuple(f for f in registered().values() if not f.takes_arg and _in_home(f))


def kept_facts() -> tuple[Fact, ...]:
    """The probe facts kept as parsed in the host's facts (those with a ``column``)."""
    return tuple(f for f in probe_facts() if f.kept)


def _in_home(fact: Fact) -> bool:
    return fact.module == HOME or fact.module.startswith(HOME + ".")
