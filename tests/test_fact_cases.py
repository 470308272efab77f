"""Every fact in the registry against its data files (pyinfra's style): ``tests/facts/<fact>/*.json``
holds cases of its command, its command's output and the value parsed from it. The registry is
enumerated, never a hand-kept list: every registered fact must have a data folder with at least one
value case and one case that checks its command, and every data folder names a registered fact.

A file holds one case or a list of them::

    {"case": "a value of several fields", "arg": "net.ipv4.tcp_rmem",
     "command": "if [ -r /proc/sys/net/ipv4/tcp_rmem ] ...",
     "output": "v 4096\\t131072\\t6291456\\n", "value": "4096 131072 6291456"}

``"command"``: the exact sh the fact runs (for ``"arg"``); ``"command_contains"`` instead, a list of
pieces it must hold (for a long command whose other parts are another fact's concern, such as the
folder walk of ``file`` and ``stat``).
``"fixture"`` instead of ``"output"``: the output is that file of ``tests/fixtures`` (a real capture,
kept once, with its source in ``tests/fixtures/SOURCES.md``).
``"error"`` instead of ``"value"``: the output is refused (a ParseError whose text matches it).
A value is written as JSON writes it: a dataclass (a FileState, a UserEntry) as its fields, tuples
as lists, numbers as keys as strings.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest
from cases_support import cases, decoded

from provision.errors import ParseError
from provision.facts.registry import FACTS, discover
from provision.operations.fact import plain  # a value as JSON holds it, as the fact operation registers it

FOLDER = Path(__file__).parent / "facts"
FIXTURES = Path(__file__).parent / "fixtures"
# Every fact declared in provision: the registry's own package, and the two higher layers that
# declare facts (tests/test_fact_registry.py keeps it to these).
REGISTERED = discover("provision.facts", "provision.operations", "provision.doctor")


CASES = cases(FOLDER)


def test_every_data_folder_names_a_registered_fact():
    assert CASES, "no fact data files"
    assert {case["folder"] for _id, case in CASES} <= set(FACTS)


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_every_registered_fact_has_cases_of_its_value_and_its_command(name):
    mine = [case for _id, case in CASES if case["folder"] == name]
    assert any("value" in case for case in mine), f"tests/facts/{name}/: no case with a value (see this module's docstring)"
    assert any("command" in case or "command_contains" in case for case in mine), (
        f"tests/facts/{name}/: no case checks the command"
    )


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_every_registered_fact_declares_the_type_of_its_value(name):
    """Its parser's return annotation: how a case's JSON value is decoded (cases_support.decoded)."""
    assert "return" in typing.get_type_hints(FACTS[name].parse), f"{name}: its parser declares no return type"


@pytest.mark.parametrize("case", [case for _id, case in CASES], ids=[name for name, _case in CASES])
def test_fact_case(case):
    fact = FACTS[case["folder"]]
    arg = case.get("arg", "")
    if "command" in case:
        assert fact.command_for(arg) == case["command"]
    for piece in case.get("command_contains", ()):
        assert piece in fact.command_for(arg)
    output = FIXTURES.joinpath(case["fixture"]).read_text() if "fixture" in case else case["output"]
    if "error" in case:
        with pytest.raises(ParseError, match=case["error"]):
            fact.read(output, arg)
        return
    value = fact.read(output, arg)
    assert json.loads(json.dumps(plain(value))) == case["value"]
    # what the operation cases rely on: the case's JSON, decoded by the type the fact declares, is the value
    assert decoded(fact, case["value"]) == value
