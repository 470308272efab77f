"""The fact registry (provision.facts.registry): where facts may be declared so that every reader
finds them whatever was imported before, what a declaration may say, and how a fixed fact is
read by setup-cluster."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import provision
from conftest import FIXTURES, run_cli
from doctor_support import node
from provision.doctor import alike
from provision.engine.statecache import stable
from provision.facts.derive import derive_facts
from provision.facts.model import HostFacts, from_json
from provision.facts.registry import FACTS, Fact, fact, kept_facts, probe_facts, registered
from provision.operations.base import StateKey
from provision.operations.fact import plain

ROOT = Path(provision.__file__).resolve().parent
# The facts package (the registry imports each of its modules itself) and, for facts whose command
# needs a higher layer's checks, the packages that import all their modules (the operations) or the
# one module doctor always imports.
HOMES = ("provision.facts.", "provision.operations.")
DOCTOR = "provision.doctor.sources"


def _declaring_modules() -> set[str]:
    found = set()
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Fact":
                parts = path.relative_to(ROOT.parent).with_suffix("").parts
                found.add(".".join(parts))
    return found


def test_facts_are_declared_only_where_the_registry_finds_them():
    modules = _declaring_modules() - {"provision.facts.registry"}  # its docstring's example
    assert {"provision.facts.system", "provision.operations.state", DOCTOR} <= modules
    assert [m for m in modules if not m.startswith(HOMES) and m != DOCTOR] == []


def test_a_fact_is_found_by_name_whatever_was_imported_before():
    # A fresh interpreter that imported only the state reads: the GPU facts' module was never
    # imported by anything, yet a state read names its fact, and the registry finds it.
    script = (
        "import sys\n"
        "from provision.operations.base import StateKey\n"
        "from provision.operations.state import state_command\n"
        "before = 'provision.facts.nvidia' in sys.modules\n"
        "command = state_command(StateKey('nvidia-smi-query'))\n"
        "print(before, 'nvidia-smi --query-gpu' in command)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


def test_every_fixed_fact_of_the_facts_package_runs_in_probe_in_registry_order():
    steps = probe_facts()
    assert steps == tuple(f for f in registered().values() if f.module.startswith("provision.facts.") and not f.takes_arg)
    assert [f.module for f in steps] == sorted(f.module for f in steps)  # by module, then as declared


@pytest.mark.parametrize(
    "declared, problem",
    [
        ({"name": "x/y"}, "a fact name is letters"),
        ({"compared": "software"}, "give it a column"),
        ({"column": "x", "compared": "network"}, "compared must be one of"),
        ({"column": "x", "differ": "maybe"}, "differ must be one of"),
        ({"command": lambda arg: arg, "column": "x"}, "only a fixed fact"),
    ],
)
def test_a_declaration_that_cannot_be_used_is_refused(declared, problem):
    fields = {"name": "example-fact", "needs": (), "command": "true", "describe": "an example", **declared}
    with pytest.raises(ValueError, match=problem):
        Fact(**fields)
    assert "example-fact" not in FACTS


def test_a_second_fact_of_a_name_is_refused():
    with pytest.raises(RuntimeError, match="declared twice"):
        Fact("hostname", (), "hostname", "again")


def test_a_fixed_fact_is_read_by_setup_cluster_without_an_argument_and_none_where_its_tool_is_missing(tmp_path):
    from provision.operations.state import parse_state, state_command, state_fact

    key = StateKey("uname-m")
    assert state_fact(key) is fact("uname-m")
    with pytest.raises(ValueError, match="without an argument"):
        state_fact(StateKey("uname-m", "x"))
    here = subprocess.run(["sh", "-c", state_command(key)], capture_output=True, text=True).stdout
    assert parse_state(key, here) == os.uname().machine
    (tmp_path / "bin").mkdir()  # a PATH without uname: "not installed" is an answer, None
    bare = subprocess.run(
        ["/bin/sh", "-c", state_command(key)], capture_output=True, text=True, env={"PATH": str(tmp_path / "bin")}
    ).stdout
    assert parse_state(key, bare) is None


def test_stable_facts_come_from_their_declarations():
    assert [k for k in ("hostinfo", "os", "pkgmgr", "file", "package") if stable(StateKey(k))] == ["hostinfo", "os", "pkgmgr"]
    assert not stable(StateKey("no-such-fact"))


def test_host_facts_round_trip_through_json_by_their_declared_types():
    captures = {p.stem: p.read_text() for p in (FIXTURES / "captures" / "node-container").glob("*.txt")}
    facts = replace(derive_facts("n1", captures), kept={"example": "value"})
    assert HostFacts.from_dict(json.loads(json.dumps(facts.to_dict()))) == facts
    data = json.loads(json.dumps(facts.to_dict()))
    with pytest.raises(TypeError, match="unknown field 'colour' in Gpu"):
        HostFacts.from_dict({**data, "gpus": [{"colour": "green"}]})
    with pytest.raises(TypeError, match=r"facts.memory_mib: expected int, got str"):
        HostFacts.from_dict({**data, "memory_mib": "lots"})
    with pytest.raises(TypeError, match="expected int, got bool"):
        from_json(int, True)


# Every kept fact (declared with a column), from the registry: a fact added by its module and its
# data cases alone is in probe's JSON, compared by doctor and read by a setup-cluster run.
@pytest.mark.parametrize("kept", kept_facts(), ids=str)
def test_a_kept_fact_is_in_probe_json_compared_by_doctor_and_read_by_setup_cluster(kept, tmp_path):
    here = subprocess.run(["sh", "-c", kept.state_command()], capture_output=True, text=True, check=True).stdout
    value = kept.read_state(here)
    if value is None:
        pytest.skip(f"{kept.name}: a tool it needs is not installed on this machine")
    done = run_cli("probe", "localhost", "--json", "--no-save")
    probed = json.loads(done.stdout)["hosts"][0]["facts"]
    assert probed["kept"][kept.name] == plain(value)

    odd = node("n3", facts=replace(node("n3").facts, kept={}))
    reports = [node(n, facts=replace(node(n).facts, kept={kept.name: value})) for n in ("n1", "n2")] + [odd]
    result = {"software": alike.check_software, "hardware": alike.check_hardware}.get(kept.compared)
    if result is not None:
        checked = result(reports)
        assert (checked.status, checked.hosts) == (kept.differ, ("n3",))
        assert f"{kept.column} none (the others {kept.shown(value)})" in checked.nodes["n3"]

    from test_engine_runner import make

    playbook = (
        "- hosts: all\n  tasks:\n"
        f"    - {{fact: {{name: {kept.name}}}, register: read}}\n"
        '    - {file: {path: "{{ root }}/read.json", content: "{{ read.value | tojson }}"}}\n'
    )
    make(tmp_path, playbook, hosts=("h1",)).run()
    assert json.loads((tmp_path / "h1" / "read.json").read_text()) == plain(value)
