"""Every operation against its data files (pyinfra's style): ``tests/operations/<operation>/*.json``
holds cases of arguments and host facts, and the changes the operation decides on them; an empty
list means the host already matches (no change, no command). The registry is enumerated: a data
folder names a registered operation.

A file holds one case or a list of them::

    {"case": "value differs", "args": {"name": "net.core.somaxconn", "value": 8192},
     "facts": [{"kind": "sysctl", "arg": "net.core.somaxconn", "value": "4096"}, ...],
     "commands": ["printf '%s\\n' 8192 >/proc/sys/net/core/somaxconn"]}

A fact the case leaves out is absent on the host (None). A ``file``/``stat`` value is written as
``{"kind": "f", "mode": "0644", "owner": "root", "group": "root", "content": "..."}`` (its
sha256 computed); a name in a sticky folder as ``{"kind": "s", "mode": "1777", "below":
"/scratch", "entry": {...} or null, "mine": true}``; an ``exists`` value as ``true``. A command
is the shell of a ``Run``, or ``{"write": path, "content": text, "mode": "0644"}`` for a file
written (owner and group when set). ``"error"``: the operation
refuses (an ArgumentError or OperationError whose text holds it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from cases_support import cases

from provision.errors import ProvisionError
from provision.operations import OPERATIONS
from provision.operations.base import FileState, GroupEntry, ServiceState, StateKey, UserEntry, Write

FOLDER = Path(__file__).parent / "operations"
CASES = cases(FOLDER)


def _file(value: dict) -> FileState:
    content = value["content"].encode() if value.get("content") is not None else None
    digest = hashlib.sha256(content).hexdigest() if content is not None else None
    mode = int(value.get("mode", "0644"), 8)
    entry = value.get("entry")  # a name in a sticky folder (kind "s"): its own state
    return FileState(
        value.get("kind", "f"),
        mode,
        value.get("owner", "root"),
        value.get("group", "root"),
        digest,
        content,
        value.get("below"),
        _file(entry) if isinstance(entry, dict) else entry,
        value.get("mine", False),
    )


DECODE = {"file": _file, "stat": _file, "user": lambda v: UserEntry(**v), "group": lambda v: GroupEntry(**v)}
DECODE["exists"] = lambda v: _file(v) if isinstance(v, dict) else v
DECODE["service"] = lambda v: ServiceState(**v)


def facts_of(case: dict) -> dict:
    facts = {}
    for fact in case.get("facts", []):
        value = fact["value"]
        facts[StateKey(fact["kind"], fact.get("arg", ""))] = (
            DECODE.get(fact["kind"], lambda v: v)(value) if value is not None else None
        )
    return facts


def shown(change) -> str | dict:
    """A change as the data files write it."""
    if isinstance(change, Write):
        written = {"write": change.path, "content": change.content.decode("utf-8", "replace")}
        written.update({"mode": f"{change.mode:04o}"} if change.mode is not None else {})
        written.update({name: getattr(change, name) for name in ("owner", "group") if getattr(change, name)})
        return written
    return change.command


def test_every_data_folder_names_a_registered_operation():
    assert CASES, "no operation data files"
    assert {case["folder"] for _id, case in CASES} <= set(OPERATIONS)


@pytest.mark.parametrize("case", [case for _id, case in CASES], ids=[name for name, _case in CASES])
def test_operation_case(case):
    operation = OPERATIONS[case["folder"]]
    if "error" in case:
        with pytest.raises(ProvisionError, match=case["error"]):
            args = operation.check_args(case["args"])
            operation.decide(args, {**dict.fromkeys(operation.requests(args)), **facts_of(case)})
        return
    args = operation.check_args(case["args"])
    current = {**dict.fromkeys(operation.requests(args)), **facts_of(case)}
    assert [shown(change) for change in operation.decide(args, current)] == case["commands"]
