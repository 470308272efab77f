"""Text from a node (or any file a user placed), safe to show on a terminal: one function.

A node's output can hold terminal escape sequences: OSC 52 writes the admin's clipboard,
``ESC[2J`` clears the screen, a carriage return hides what came before it on the line, a
right-to-left override reorders what the admin reads. :func:`shown` writes every control
character as an escape (``\\x1b``, ``\\u202e``), so the bytes are seen, never obeyed. Every way
provision prints goes through it: the CLI's consoles (``SafeConsole`` in :mod:`provision.cli.output`, for
tables, messages and errors in every command), the ad-hoc command's output and the playbook
engine's messages.

    >>> shown("Tesla V100\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J")
    'Tesla V100\\\\x1b]52;c;cm0gLXJmIH4=\\\\x07\\\\x1b[2J'
    >>> shown("two\\nlines\\r")
    'two\\nlines\\\\x0d'

:func:`printable` is the one-line form for messages: escaped, newlines too, and cut to a length.

A value in a one-line message (an error naming what was wrong) goes through :func:`shown_value`: text
in plain single quotes, escaped and on one line; numbers, true/false, lists as YAML shows them; never
Python's ``repr``, which doubles backslashes, switches quotes and prints ``None``.

    >>> print(shown_value("it's\\x1b[2J"), shown_value(None), shown_value(["a", 3]), shown_value(True))
    'it's\\x1b[2J' (empty) ['a', 3] true
"""

from __future__ import annotations

import re

# C0 but newline and tab, DEL, C1; and the invisible format characters that change what a reader sees
# (Unicode's bidi controls, zero-width characters, line and paragraph separators, BOM). One
# character class: linear time on any input.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_CONTROL_OR_NEWLINE = re.compile("[\t\n" + _CONTROL.pattern[1:])


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str, *, newlines: bool = True) -> str:
    """``text`` with each control character written as an escape (``\\x1b``); line breaks and
    tabs are kept when ``newlines`` (multi-line output), else escaped too (one line per host)."""
    return (_CONTROL if newlines else _CONTROL_OR_NEWLINE).sub(_escape, text)


def printable(text: str, limit: int = 300, newlines: bool = False) -> str:
    """Text a node sent, safe to show on a terminal or in --json: every control character
    (escape sequences, bells; newlines too unless ``newlines``) escaped by :func:`provision.text.shown`,
    at most ``limit`` characters (``...`` marks a cut)."""
    clean = shown(text[: limit * 4].strip(), newlines=newlines)
    return clean if len(clean) <= limit else clean[: max(limit - 3, 0)] + "..."


_DIGITS = re.compile(r"[0-9]+")


def is_number(text: object) -> bool:
    """Whether ``text`` is ASCII digits only (``'²'.isdigit()`` is True, yet ``int('²')`` raises)."""
    return isinstance(text, str) and _DIGITS.fullmatch(text) is not None


def shown_value(value: object, limit: int = 80) -> str:
    """``value`` (from a user's file, an option or a node) for a one-line message: text in single
    quotes with every control character and line break escaped, cut at ``limit`` characters (``…``);
    ``None`` (a YAML key left empty) as ``(empty)``; true/false, numbers, lists and mappings as YAML
    spells them, their items quoted the same way.

        >>> shown_value("abc"), shown_value(""), shown_value(8080), shown_value([1, "x"]), shown_value({"a": None})
        ("'abc'", "''", '8080', "[1, 'x']", "{'a': (empty)}")
        >>> shown_value("x" * 100, limit=5)
        "'xxxxx…'"
    """
    if value is None:
        return "(empty)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = ", ".join(shown_value(item, limit) for item in value)
        return "[" + (items if len(items) <= limit else items[:limit] + "…") + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{shown_value(key, limit)}: {shown_value(item, limit)}" for key, item in value.items())
        return "{" + (items if len(items) <= limit else items[:limit] + "…") + "}"
    text = str(value)
    return "'" + shown(text[:limit], newlines=False) + ("…" if len(text) > limit else "") + "'"
