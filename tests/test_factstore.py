"""Facts directory: save, load, corrupt files."""

from pathlib import Path

import pytest

from conftest import capture_dir
from provision.errors import FactsError
from provision.factstore import cached_hosts, load_host, read_capture_dir, save_host
from provision.gather import Capture
from provision.probe import facts_from_captures


def test_save_then_load_and_replayable_layout(tmp_path):
    captures = {n: Capture(n, 0, t, "") for n, t in capture_dir("minsky").items()}
    captures["nvidia-smi-query"] = Capture("nvidia-smi-query", 127, "", "")
    result = facts_from_captures("minsky", captures)
    (tmp_path / "minsky").mkdir()
    (tmp_path / "minsky" / "nvidia-smi-query.txt").write_text("stale")
    save_host(tmp_path, result.facts, captures)
    assert load_host(tmp_path, "minsky") == result.facts
    assert cached_hosts(tmp_path) == ["minsky"]
    assert set(read_capture_dir(tmp_path / "minsky")) == {"numactl-H", "ppc64_cpu-info", "openmpi"}


def test_missing_and_corrupt(tmp_path):
    with pytest.raises(FactsError, match="provision probe nodeX"):
        load_host(tmp_path, "nodeX")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(FactsError, match="bad.json: corrupt"):
        load_host(tmp_path, "bad")


def test_host_name_cannot_escape_the_folder(tmp_path):
    with pytest.raises(FactsError, match="not a host name"):
        load_host(tmp_path / "facts", "../secret")


@pytest.mark.parametrize("name", ["/tmp/provision-test-forged", "../../x", "../x"])
def test_save_writes_nothing_for_an_unknown_capture_name(tmp_path, name):
    captures = {n: Capture(n, 0, t, "") for n, t in capture_dir("minsky").items()}
    facts = facts_from_captures("minsky", captures).facts
    captures[name] = Capture(name, 0, "forged", "")
    with pytest.raises(FactsError, match="unknown capture name"):
        save_host(tmp_path / "facts", facts, captures)
    assert not (tmp_path / "facts").exists() and list(tmp_path.iterdir()) == []
    assert not Path(f"{name}.txt").exists() and not Path("/tmp/provision-test-forged.txt").exists()
