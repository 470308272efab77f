"""Every fact in the registry against its data files (pyinfra's style): ``tests/facts/<fact>/*.json``
holds cases of its command's output and the value parsed from it. The registry is enumerated,
never a hand-kept list: a data folder names a registered fact, and a fact of one thing (a state
kind) that has a data folder is checked case by case.

A file holds one case or a list of them::

    {"case": "a value of several fields", "arg": "net.ipv4.tcp_rmem",
     "output": "v 4096\\t131072\\t6291456\\n", "value": "4096 131072 6291456"}

``"fixture"`` instead of ``"output"``: the output is that file of ``tests/fixtures`` (a real capture,
kept once, with its source in ``tests/fixtures/SOURCES.md``).
``"error"`` instead of ``"value"``: the output is refused (a ParseError whose text holds it).
A dataclass value (a FileState, a UserEntry) is written as its fields (tuples as lists).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from cases_support import cases

from provision.errors import ParseError
from provision.facts.registry import FACTS, discover

FOLDER = Path(__file__).parent / "facts"
FIXTURES = Path(__file__).parent / "fixtures"
discover("provision.facts", "provision.operations", "provision.doctor")  # every fact declared in provision


def as_json(value):
    """``value`` as the data files write it."""
    if dataclasses.is_dataclass(value):
        return {field.name: as_json(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [as_json(item) for item in value]
    if isinstance(value, dict):
        return {key: as_json(item) for key, item in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


CASES = cases(FOLDER)


def test_every_data_folder_names_a_registered_fact():
    assert CASES, "no fact data files"
    assert {case["folder"] for _id, case in CASES} <= set(FACTS)


@pytest.mark.parametrize("case", [case for _id, case in CASES], ids=[name for name, _case in CASES])
def test_fact_case(case):
    fact = FACTS[case["folder"]]
    output = FIXTURES.joinpath(case["fixture"]).read_text() if "fixture" in case else case["output"]
    if "error" in case:
        with pytest.raises(ParseError, match=case["error"]):
            fact.read(output, case.get("arg", ""))
        return
    assert as_json(fact.read(output, case.get("arg", ""))) == case["value"]
