"""Ansible's host patterns, over an inventory: which hosts ``gpu:!w3`` or ``w[1:3]`` mean.

A pattern is terms separated by ``,`` or ``:`` (a ``:`` inside ``[...]`` or a ``~regex`` does
not separate). Each term is:

- ``all`` or ``*``: every host;
- a group, a rack (``racks:`` names) or a host name;
- a glob (``w*``, ``node?``, ``gpu-[ab]*``) matched against group, rack and host names;
- ``~REGEX``: host, group and rack names the regular expression matches from their start;
- ``NAME[i]``, ``NAME[i:j]`` (j included), ``NAME[i:]``, ``NAME[:j]``, ``NAME[-1]``: hosts by
  position in what ``NAME`` matches (Ansible's subscripts);
- ``w[1:3]``, ``node[01:16]``, ``w[a:c]`` where no group or host ``w`` exists: the host range
  of the inventory syntax (w1, w2, w3).

``!TERM`` removes hosts, ``&TERM`` keeps only hosts also in TERM; as in Ansible, plain terms are
added first, then intersections, then exclusions (and only modifiers means ``all`` first).

A term that matches nothing is an error that lists the groups and hosts, unless it is a plain
name and the caller takes unknown names as ad-hoc hosts (``probe new-node``).
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from provision.errors import ProvisionError
from provision.text import shown_value

if TYPE_CHECKING:
    from provision.inventory.model import Host, Inventory

_RANGE = re.compile(r"\[([0-9]+):([0-9]+)\]|\[([a-z]):([a-z])\]")
_SUBSCRIPT = re.compile(r"^(?P<base>.+)\[(?:(?P<index>-?[0-9]+)|(?P<start>-?[0-9]*):(?P<end>-?[0-9]*))\]\Z")
# "[" opens a range only up to its "]", never across another "[": each try stops at the next
# bracket, so a pattern of many "[" is split in linear time (issue 24, finding 5).
_TERM_SPLIT = re.compile(r"(?:[^:\[\]]|\[[^\[\]]*\])+")
_GLOB = set("*?[")
_MAX_LISTED = 12


class PatternError(ProvisionError):
    """A host pattern that is malformed or matches nothing; the message lists what would match."""


def expand_host_range(pattern: str) -> list[str]:
    """``node[01:03]`` -> ``node01, node02, node03`` (Ansible's syntax; letters too)."""
    match = _RANGE.search(pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    if match.group(1) is not None:
        first, last = match.group(1), match.group(2)
        width = len(first) if first.startswith("0") else 0
        items = [str(number).zfill(width) for number in range(int(first), int(last) + 1)]
    else:
        items = [chr(code) for code in range(ord(match.group(3)), ord(match.group(4)) + 1)]
    return [name for item in items for name in expand_host_range(head + item + tail)]


def split_pattern(text: str) -> list[str]:
    """``"gpu:!w3,w[1:3]"`` -> ``["gpu", "!w3", "w[1:3]"]`` (empty terms dropped)."""
    terms: list[str] = []
    for part in text.split(","):
        pieces = [piece.strip() for piece in _TERM_SPLIT.findall(part)]
        for index, piece in enumerate(pieces):
            if piece.lstrip("!&").startswith("~"):  # a regex may hold ':' of its own: the rest is its
                terms.append(":".join(pieces[index:]))
                break
            if piece:
                terms.append(piece)
    return terms


def name_list(names: list[str], limit: int = _MAX_LISTED) -> str:
    """``a, b, c and 9 more`` (``none`` when empty): names for a one-line message."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "") if names else "none"


class _Matcher:
    """Term -> hosts, for one inventory."""

    def __init__(self, inventory: Inventory, unknown: Callable[[str], Host] | None, what: str):
        self.inventory, self.unknown, self.what = inventory, unknown, what
        # Racks are groups for patterns (``gpu:&rack1``); a group of the same name wins.
        self.groups: dict[str, tuple[str, ...]] = dict(inventory.groups)
        for rack in inventory.racks:
            self.groups.setdefault(rack.name, rack.hosts)

    def nothing(self, term: str) -> PatternError:
        """The error for a term that matches nothing: what exists, and the closest names."""
        known = [*self.groups, *self.inventory.hosts]
        close = set(difflib.get_close_matches(term.lstrip("!&~"), known, n=3, cutoff=0.5))
        close = [name for name in known if name in close]
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        where = f" in {self.inventory.path}" if self.inventory.path else ""
        return PatternError(
            f"{self.what} {shown_value(term)} matches no host{where} (groups: {name_list(list(self.groups))}; "
            f"hosts: {name_list(list(self.inventory.hosts))}; patterns: all, w*, gpu:!w3, gpu:&rack1, w[1:3], ~regex){hint}"
        )

    def names(self, names: list[str]) -> list[Host]:
        return [self.inventory.hosts[name] for name in names]

    def by_name(self, term: str, glob: bool) -> list[str]:
        """Host names of the groups/racks/hosts ``term`` names (or, as a glob, matches)."""
        if glob or term.startswith("~"):
            if term.startswith("~"):
                try:
                    regex = re.compile(term[1:])
                except re.error as error:
                    raise PatternError(f"{self.what} {shown_value(term)}: bad regular expression: {error}") from None
                hit: Callable[[str], bool] = lambda name: regex.match(name) is not None  # noqa: E731
            else:
                hit = lambda name: fnmatch.fnmatchcase(name, term)  # noqa: E731
            found = [h for group, members in self.groups.items() if hit(group) for h in members]
            return found + [name for name in self.inventory.hosts if hit(name)]
        if term in ("all", "*"):
            return list(self.inventory.hosts)
        if term in self.groups:
            return list(self.groups[term])
        if term in self.inventory.hosts:
            return [term]
        return []

    def match(self, term: str, plain_ok: bool) -> list[Host]:
        """The hosts of one term (no ``!``/``&``); unknown plain names go to ``unknown``."""
        subscript = None if term.startswith("~") else _SUBSCRIPT.match(term)
        if subscript:
            base = subscript.group("base")
            found = self.by_name(base, bool(_GLOB & set(base)))
            if found:
                return self.names(_slice(list(dict.fromkeys(found)), subscript, term, self.what))
            expanded = expand_host_range(term)
            if expanded != [term]:  # w[1:3] with no group or host w: the inventory's range syntax
                return [host for name in expanded for host in self.match(name, plain_ok)]
            raise self.nothing(term)
        glob = bool(_GLOB & set(term)) and term != "*"
        found = self.by_name(term, glob)
        if found:
            return self.names(found)
        if not glob and not term.startswith("~") and plain_ok and self.unknown is not None:
            return [self.unknown(term)]
        raise self.nothing(term)


def _slice(hosts: list[str], match: re.Match, term: str, what: str) -> list[str]:
    """Ansible's subscript: ``[i]`` one host, ``[i:j]`` i to j with j included."""
    if match.group("index") is not None:
        index = int(match.group("index"))
        if not -len(hosts) <= index < len(hosts):
            raise PatternError(
                f"{what} {shown_value(term)}: {match.group('base')} has {len(hosts)} hosts (positions 0 to {len(hosts) - 1})"
            )
        return [hosts[index]]
    start = int(match.group("start") or 0)
    end = int(match.group("end")) if match.group("end") else len(hosts) - 1
    if end < 0:
        end += len(hosts)
    return hosts[start : end + 1]


def select_hosts(
    inventory: Inventory, patterns: list[str], unknown: Callable[[str], Host] | None = None, what: str = "host pattern"
) -> list[Host]:
    """The hosts ``patterns`` (each a pattern, e.g. one command-line word) select, in order,
    without repeats. ``unknown``: how to take a plain name the inventory lacks (None: an error)."""
    terms = [term for pattern in patterns or ["all"] for term in split_pattern(pattern)]
    if not terms:
        raise PatternError(f"{what} {shown_value(', '.join(patterns))} is empty")
    for term in terms:
        if not term.lstrip("!&"):
            raise PatternError(f"{what} {shown_value(term)}: '!' and '&' need a host, group or pattern after them")
    matcher = _Matcher(inventory, unknown, what)
    regular = [t for t in terms if t[0] not in "!&"] or ["all"]
    chosen: dict[str, Host] = {}
    for term in regular:
        for host in matcher.match(term, plain_ok=True):
            chosen.setdefault(host.name, host)
    for term in (t for t in terms if t[0] == "&"):
        keep = {host.name for host in matcher.match(term[1:], plain_ok=False)}
        chosen = {name: host for name, host in chosen.items() if name in keep}
    for term in (t for t in terms if t[0] == "!"):
        for host in matcher.match(term[1:], plain_ok=False):
            chosen.pop(host.name, None)
    return list(chosen.values())
