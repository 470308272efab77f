"""Every operation against its data files (pyinfra's style): ``tests/operations/<operation>/*.json``
holds cases of arguments and host facts, and the changes the operation decides on them; an empty
list means the host already matches (no change, no command). The registry is enumerated, never a
hand-kept list: every registered operation must have a data folder with a case where the host
already matches (no command), a case of a change (its commands) and a case of bad input or a
refused state (its refusal), and every data folder names a registered operation.

A file holds one case or a list of them::

    {"case": "value differs", "args": {"name": "net.core.somaxconn", "value": 8192},
     "facts": [{"kind": "sysctl", "arg": "net.core.somaxconn", "value": "4096"}, ...],
     "commands": ["printf '%s\\n' 8192 >/proc/sys/net/core/somaxconn"]}

A fact the case leaves out is absent on the host (None). A fact is given as its value, decoded
by the type its declaration gives (``cases_support.decoded``: a ``file`` value is a FileState's
fields, those left out taking their defaults, its sha256 computed from its content, a mode as
octal text ``"0644"``; a ``user`` value a UserEntry's), or as what its command printed on a node:
``"output"`` (text), or ``"fixture"`` (a file of ``tests/fixtures``; ``FILE.json#N``: the fact
frame N of that recorded setup-cluster round trip), parsed by the fact's own parser. A command
is the shell of a ``Run``, or ``{"write": path, "content": text, "mode": "0644"}`` for a file
written (owner and group when set). ``"error"``: the operation refuses (an ArgumentError or
OperationError whose text holds it). A fact read as a user (a ``command`` fact, a file in a
folder only its owner acts in) gives that ``"user"``.

What an operation reads on the controller (a MUNGE key file, a password file, an installer) is
given as ``"controller": {"relative/path": {"text": ..., "mode": "0400"}}``: the files are made in
a fresh folder, and ``{controller}`` in the arguments is that folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cases_support import cases, decoded

from provision.engine.user_shells import batch_nonce
from provision.errors import ProvisionError
from provision.operations import OPERATIONS
from provision.operations.base import StateKey, Write
from provision.operations.state import state_fact
from provision.transport.frames import split_frames

FOLDER = Path(__file__).parent / "operations"
FIXTURES = Path(__file__).parent / "fixtures"
CASES = cases(FOLDER)
# Operations that only read (their cases cannot hold a change): why, each.
NEVER_CHANGE = {
    "fact": "it reads a fact and registers its value",
    "nfs_check": "it fails a node that cannot serve or mount NFS, before any change",
    "nfs_server_kind": "it registers which NFS server the node can run",
    "jupyter_ports": "it fails a node where another program holds a user's Jupyter port",
    "module_system": "it registers which module command the node has",
}


def node_output(fact: dict) -> str:
    """What the fact's command printed: the case's ``output``, or its ``fixture``."""
    if "output" in fact:
        return fact["output"]
    name, _, frame = fact["fixture"].partition("#")
    text = FIXTURES.joinpath(name).read_text()
    if not frame:
        return text
    recorded = json.loads(text)["round_trips"][0]["stdout"]  # the recorded run's nonce is written NONCE
    frames = split_frames(recorded, "NONCE")
    for batch in [f for f in frames if f.label == "batch"]:  # a user's reads, framed with her batch's marker
        frames += split_frames(batch.body, batch_nonce("NONCE", batch.numbers[0]))
    [found] = [f.body for f in frames if f.label == "fact" and f.numbers == (int(frame),)]
    return found


def facts_of(case: dict) -> dict:
    facts = {}
    for fact in case.get("facts", []):
        key = StateKey(fact["kind"], fact.get("arg", ""), fact.get("user", ""))
        declared = state_fact(key)
        if "value" in fact:
            facts[key] = decoded(declared, fact["value"])
        else:
            facts[key] = declared.read(node_output(fact), key.arg)
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
    assert set(NEVER_CHANGE) <= set(OPERATIONS)


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_every_registered_operation_has_cases_of_no_change_a_change_and_a_refusal(name):
    mine = [case for _id, case in CASES if case["folder"] == name]
    where = f"tests/operations/{name}/"
    assert any(case.get("commands") == [] for case in mine), f"{where}: no case where the host already matches"
    assert any("error" in case for case in mine), f"{where}: no case of bad input or a refused state"
    if name not in NEVER_CHANGE:
        assert any(case.get("commands") for case in mine), f"{where}: no case of a change (its commands)"


def controller_args(case: dict, folder: Path) -> dict:
    """The case's arguments, its controller files made in ``folder`` (``{controller}`` in a value)."""
    for name, file in case.get("controller", {}).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(file["text"])
        path.chmod(int(file.get("mode", "0644"), 8))
    return {k: v.replace("{controller}", str(folder)) if isinstance(v, str) else v for k, v in case["args"].items()}


@pytest.mark.parametrize("case", [case for _id, case in CASES], ids=[name for name, _case in CASES])
def test_operation_case(case, tmp_path):
    operation = OPERATIONS[case["folder"]]
    case = {**case, "args": controller_args(case, tmp_path)}
    assert ("error" in case) != ("commands" in case), "a case holds its commands or its error"
    if "error" in case:
        with pytest.raises(ProvisionError, match=case["error"]):
            args = operation.check_args(case["args"])
            operation.decide(args, {**dict.fromkeys(operation.requests(args)), **facts_of(case)})
        return
    args = operation.check_args(case["args"])
    current = {**dict.fromkeys(operation.requests(args)), **facts_of(case)}
    assert [shown(change) for change in operation.decide(args, current)] == case["commands"]
