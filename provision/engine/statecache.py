"""What the engine knows of one host's state, and since when (the state model).

In one sentence: a fact is trusted from when it was read (or stated exactly by a planned change)
until a later planned change may alter it; then it is read again, after the pending changes are
applied, when a task needs it (in --check, where nothing is applied, it is predicted on its last
value).

Every value is kept with the number of changes planned on the host before it became true: a value
read from the host after the pending changes were applied counts from then; a value a change
states exactly (a Write knows its file, useradd knows its user) counts from that change. A value
is trusted for a decision only while no later change may have altered it. What a change may alter
is its :class:`Scope`: the facts it states, plus the paths it touches (a Write: its file and
backup), or anything at all (a command, a package install: nothing is predicted for them).

In --check nothing is applied, so the host still shows the state before every planned change: a
fact a planned change may have altered is :data:`UNKNOWN` there (its last read value is kept as a
hint, never as a truth).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from provision.facts.registry import fact
from provision.operations.base import UNKNOWN, Run, StateKey, UserEntry, Write, split_home

IDENTITY = StateKey("hostinfo")  # host name, addresses, host keys: read once, at the start of the run


def stable(key: StateKey) -> bool:
    """Whether no change of a run alters ``key``'s fact (declared ``stable``: the host's identity,
    its OS family, its package manager, whether systemd runs as PID 1): it stays trusted after a
    change that may alter anything (in --check too, where nothing is read again), so a precondition
    on it is foreseen exactly by --check (issue 34: a service on a node without systemd)."""
    try:
        return not key.arg and fact(key.kind).stable
    except KeyError:  # no such fact: nothing says it is stable
        return False


def _of_a_path(key: StateKey) -> bool:
    """Whether ``key``'s fact is declared one of a path on the node (``Fact.path``)."""
    try:
        return fact(key.kind).path
    except KeyError:  # no such fact: never read, nothing to trust
        return False


@dataclass(frozen=True)
class Scope:
    """What one planned change may have altered: ``stated`` facts (exact values, or UNKNOWN) and
    ``paths`` it touches (None: anything)."""

    stated: tuple[tuple[StateKey, Any], ...] = ()
    paths: tuple[str, ...] | None = None
    predicted: tuple[tuple[StateKey, Any], ...] = ()  # --check: what a change decided on stale facts would set


ANYTHING = Scope()


def scope_of(change: Run | Write, exact: bool = True) -> Scope:
    """The scope of a change; with ``exact`` False (a change planned on stale facts, --check) its
    stated values become UNKNOWN: the keys are altered, the values not known."""
    if isinstance(change, Write):
        paths: tuple[str, ...] | None = (change.path, change.path + ".provision~")
    else:
        paths = change.touches
    stated = tuple((key, value if exact else UNKNOWN) for key, value in change.effects)
    return Scope(stated, paths, () if exact else tuple(change.effects))


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


@dataclass
class StateCache:
    """The facts of one host, each with the change count it dates from, and the planned scopes."""

    entries: dict[StateKey, tuple[Any, int]] = field(default_factory=dict)
    scopes: list[Scope] = field(default_factory=list)
    # --check: the value a change decided on stale facts would give a fact (useradd's user): the
    # hint later tasks predict on, rather than the value read before it (the user absent)
    predicted: dict[StateKey, Any] = field(default_factory=dict)

    @property
    def epoch(self) -> int:
        """How many changes were planned on this host so far."""
        return len(self.scopes)

    def store(self, key: StateKey, value: Any, epoch: int) -> None:
        """A value read from the host, true as of ``epoch`` (the changes applied before the read)."""
        self.entries[key] = (value, epoch)
        if epoch >= len(self.scopes) or not self.altered_since(key, epoch):
            self.predicted.pop(key, None)

    def plan(self, scope: Scope) -> None:
        """A change was planned: what it states becomes the value from now on (what it would set,
        when decided on stale facts, the hint)."""
        self.scopes.append(scope)
        for key, value in scope.stated:
            if value is not UNKNOWN:
                self.entries[key] = (value, self.epoch)
                self.predicted.pop(key, None)
        for key, value in scope.predicted:
            if value is UNKNOWN:
                self.predicted.pop(key, None)
            else:
                self.predicted[key] = value

    def known(self, key: StateKey) -> bool:
        """Whether ``key`` has a value no later change may have altered."""
        entry = self.entries.get(key)
        return entry is not None and not self.altered_since(key, entry[1])

    def altered_since(self, key: StateKey, epoch: int) -> bool:
        """Whether a change planned after ``epoch`` may have altered ``key``."""
        return any(self._touches(scope, key) for scope in self.scopes[epoch:])

    def value(self, key: StateKey) -> Any:
        """The trusted value (None when absent on the host), or UNKNOWN."""
        return self.entries[key][0] if self.known(key) else UNKNOWN

    def was_read(self, key: StateKey) -> bool:
        """Whether ``key`` has a value at all (read, or stated by a change), trusted or not."""
        return key in self.entries

    def hint(self, key: StateKey) -> Any:
        """The last value read or stated, trusted or not, or what a planned change would set
        (--check); None when never read."""
        if key in self.predicted:
            return self.predicted[key]
        entry = self.entries.get(key)
        return None if entry is None or entry[0] is UNKNOWN else entry[0]

    def unknown(self, keys: Iterable[StateKey]) -> list[StateKey]:
        """The keys that have no trusted value."""
        return [key for key in dict.fromkeys(keys) if not self.known(key)]

    def _touches(self, scope: Scope, key: StateKey) -> bool:
        if stable(key):
            return False
        if any(stated == key for stated, _ in scope.stated):
            return True
        if scope.paths is None or not _of_a_path(key):  # a change that names its paths leaves other paths alone
            return True
        return any(self._paths_overlap(key.arg, path) for path in scope.paths)

    def _paths_overlap(self, a: str, b: str) -> bool:
        """Whether two checked paths may name the same file or one lies below the other; a
        ``~user`` path is compared through that user's home when known, else assumed to overlap."""
        ra, rb = self._resolve(a), self._resolve(b)
        if ra is not None and rb is not None:
            return _overlap(ra, rb)
        (ua, resta), (ub, restb) = split_home(a), split_home(b)
        if ua is not None and ua == ub:
            return _overlap("/" + resta, "/" + restb)
        return True

    def _resolve(self, path: str) -> str | None:
        user, rest = split_home(path)
        if user is None:
            return path
        entry = self.hint(StateKey("user", user))
        if not isinstance(entry, UserEntry) or not entry.home.startswith("/"):
            return None
        return entry.home.rstrip("/") + ("/" + rest if rest else "")
