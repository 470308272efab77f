"""probe/service.py: what `provision probe` does below the command line, on replayed real
captures (tests/fixtures/captures: minsky from the source document, node-hwloc from a container)."""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from provision.errors import ProvisionError
from provision.probe.service import ProbeRequest, collect, replay_facts_dir


def test_replayed_hosts_saved_and_a_failure_costs_its_host_only(tmp_path):
    run = collect(ProbeRequest(tmp_path / "facts", ["minsky", "node-hwloc", "ac922"], replay_dir=FIXTURES / "captures"))
    assert [r.host for r in run.results] == ["minsky", "node-hwloc", "ac922"]
    assert [r.ok for r in run.results] == [True, True, False] and not run.ok  # ac922's capture lacks lscpu -p
    assert sorted(p.name for p in (tmp_path / "facts").glob("*.json")) == ["minsky.json", "node-hwloc.json"]
    assert run.unsaved == []


def test_facts_that_cannot_be_saved_are_one_line_per_host(tmp_path):
    (tmp_path / "facts").write_text("a file where the facts folder should be")
    run = collect(ProbeRequest(tmp_path / "facts", ["minsky"], replay_dir=FIXTURES / "captures"))
    assert run.results[0].ok and not run.ok
    [line] = run.unsaved
    assert line.startswith("minsky: cannot save facts: ") and str(tmp_path / "facts") in line


def test_no_save_writes_nothing_and_a_missing_folder_is_one_error(tmp_path):
    run = collect(ProbeRequest(tmp_path / "facts", ["minsky"], replay_dir=FIXTURES / "captures", save=False))
    assert run.ok and not (tmp_path / "facts").exists()
    with pytest.raises(ProvisionError, match="no such capture folder"):
        collect(ProbeRequest(tmp_path / "facts", replay_dir=tmp_path / "missing"))
    assert replay_facts_dir(tmp_path / "cap") == (tmp_path / "cap.facts").resolve()
