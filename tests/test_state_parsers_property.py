"""Property tests for the engine's state parsers (every state kind in the fact registry):
whatever a node prints, each parser returns a value or raises ParseError, never anything else
(``'²'.isdigit()`` is True, yet ``int('²')`` raises ValueError)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings, strategies as st

from provision.errors import ParseError
from provision.facts.registry import discover
from provision.operations.base import StateKey
from provision.operations.state import parse_state

# Every fact of one thing in the registry (no hand-kept list): its argument only names it in errors.
# The fixed facts a state read may name too are fed arbitrary text in tests/test_parsers_property.py.
KEYS = [
    StateKey(fact.name, "/srv/data")
    for fact in discover("provision.facts", "provision.operations", "provision.doctor").values()
    if fact.takes_arg
]

# Digits of other scripts (superscripts, Arabic-Indic, fullwidth...) that str.isdigit accepts.
ODD_DIGITS = ["²", "³", "¹", "٣", "０", "߁", "①", "𝟙"]
FRAGMENTS = [
    "alice:x:2001:2001::/home/alice:/bin/bash",
    "mpi:x:3000:",
    "regular file|644|root|root|12",
    "directory|755|root|root|4096",
    "a" * 64,
    "aGVsbG8=",
    "absent",
    "ii |1.2",
    "0",
    "kernel",
    "none",
    "alive",
    "cap 000001ffffffffff",
    "no mount.nfs (nfs-common)",
    "  0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1",
    "/dev/sda1 1000 10 990 1% /",
    "server:/data nfs4",
    "h node1",
    "a 10.0.0.1",
    "k ssh-ed25519 AAAA",
    "active",
    "enabled",
]
PIECE = st.one_of(
    st.sampled_from(FRAGMENTS), st.sampled_from(ODD_DIGITS), st.sampled_from([":", "|", " ", "\n", "\t"]), st.text(max_size=8)
)


def _mangle(fragment: str, digit: str) -> str:
    return "".join(digit if ch.isdigit() else ch for ch in fragment)


TEXT = st.one_of(
    st.text(max_size=300),
    st.lists(PIECE, max_size=40).map("".join),
    st.builds(_mangle, st.sampled_from(FRAGMENTS), st.sampled_from(ODD_DIGITS)),
    st.lists(st.builds(_mangle, st.sampled_from(FRAGMENTS), st.sampled_from(ODD_DIGITS + ["1"])), max_size=6).map("\n".join),
)


@pytest.mark.parametrize("key", KEYS, ids=lambda k: k.kind)
@settings(max_examples=300, deadline=None)
@given(text=TEXT)
def test_every_state_parser_returns_or_raises_parse_error(key, text):
    with contextlib.suppress(ParseError):
        parse_state(key, text)


@pytest.mark.parametrize(
    "key,text",
    [
        (StateKey("user", "alice"), "alice:x:²001:2001::/home/alice:/bin/bash"),
        (StateKey("user", "alice"), "alice:x:2001:٣::/home/alice:/bin/bash"),
        (StateKey("group", "mpi"), "mpi:x:３000:"),
        (StateKey("command", "true"), "²"),
        (StateKey("listening"), "  0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     ²        0 1"),
        (StateKey("df", "/"), "/dev/sda1 1000 10 ٩٩٠ 1% /"),
        # Found by the property test above (hypothesis): non-ASCII where the base64 content goes.
        (StateKey("file", "/etc/x"), "regular file|0|||\r=\x80"),
    ],
)
def test_non_ascii_digits_are_a_parse_error(key, text):
    with pytest.raises(ParseError):
        parse_state(key, text)
