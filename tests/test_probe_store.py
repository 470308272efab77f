"""Facts directory: save, load, corrupt files."""

import json
import os
from pathlib import Path

import pytest

from conftest import capture_dir
from provision.errors import FactsError
from provision.probe.gather import Capture
from provision.probe.run import facts_from_captures
from provision.probe.store import cached_hosts, load_host, read_capture_dir, save_host


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


def _saved_minsky(facts_dir):
    captures = {n: Capture(n, 0, t, "") for n, t in capture_dir("minsky").items()}
    save_host(facts_dir, facts_from_captures("minsky", captures).facts, captures)
    return facts_dir / "minsky.json"


def _edit(path, **changes):
    data = json.loads(path.read_text())
    for dotted, value in changes.items():
        target = data
        *parents, last = dotted.split("__")
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[last] = value
    path.write_text(json.dumps(data))


def test_host_field_must_match_the_file_name(tmp_path):
    path = _saved_minsky(tmp_path)
    _edit(path, host="other")
    with pytest.raises(FactsError, match=r"minsky\.json: .*'other'.*file name") as caught:
        load_host(tmp_path, "minsky")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "field, value",
    [
        ("host", "minsky\nrank 99=evil slot=0:0"),
        ("hostname", "minsky\nrank 99=evil slot=0:0"),
        ("hostname", "evil;rm -rf /"),
        ("hostname", ""),
        ("cpu__source", "numactl-H\n#injected"),
        ("probed_at", "2026\rrank 0=evil"),
        ("arch", "x86_64\u2028rank"),
        ("openmpi__version", "4.1\n5"),
        ("notes", ["fine", "bad\nline"]),
        ("sources__cpu", "ok\x1b[2J"),
    ],
)
def test_fields_that_reach_rank_files_cannot_carry_lines(tmp_path, field, value):
    path = _saved_minsky(tmp_path)
    _edit(path, **{field: value})
    with pytest.raises(FactsError, match=r"minsky\.json: ") as caught:
        load_host(tmp_path, "minsky")
    assert "\n" not in str(caught.value) and "\r" not in str(caught.value)


def test_reasons_provision_itself_saved_still_load(tmp_path):
    """``unavailable`` holds the first line of a failed command's stderr: odd bytes there are kept."""
    path = _saved_minsky(tmp_path)
    _edit(path, unavailable={"nvidia-smi-query": "exit 9: \x1b[31mNVML\tfailed"})
    assert load_host(tmp_path, "minsky").unavailable["nvidia-smi-query"].endswith("failed")
    _edit(path, unavailable={"nvidia-smi-query": "exit 9\nrank 0=evil"})
    with pytest.raises(FactsError, match="line break"):
        load_host(tmp_path, "minsky")


def test_raw_captures_are_private_even_in_a_folder_an_older_version_made(tmp_path):
    """Issue 24 finding 2: raw captures (node text, or a replayed folder's) are not published."""
    captures = {n: Capture(n, 0, t, "") for n, t in capture_dir("minsky").items()}
    facts = facts_from_captures("minsky", captures).facts
    (tmp_path / "facts" / "minsky").mkdir(parents=True, mode=0o755)
    os.chmod(tmp_path / "facts" / "minsky", 0o755)
    (tmp_path / "facts" / "minsky" / "numactl-H.txt").write_text("old\n")
    os.chmod(tmp_path / "facts" / "minsky" / "numactl-H.txt", 0o644)
    save_host(tmp_path / "facts", facts, captures)
    assert (tmp_path / "facts" / "minsky").stat().st_mode & 0o777 == 0o700
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "facts" / "minsky").iterdir()} == {0o600}
    assert (tmp_path / "facts" / "minsky.json").stat().st_mode & 0o777 == 0o644


# Issue 37: run in a child with RLIMIT_NOFILE's soft limit at 128, as a login session's 1024 is to 4096 hosts.
_MANY_HOSTS = r"""
import dataclasses, resource, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from conftest import capture_dir
from provision.probe.gather import Capture
from provision.probe.run import facts_from_captures
from provision.probe.store import batch_size, save_hosts
resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
captures = {n: Capture(n, 0, t, "") for n, t in capture_dir("minsky").items()}
facts = facts_from_captures("minsky", captures).facts
hosts = [(dataclasses.replace(facts, host=f"n{i:04d}"), captures) for i in range(300)]
print(batch_size(), save_hosts(Path(sys.argv[1]), hosts))
"""


def test_more_hosts_than_open_files_are_all_saved(tmp_path):
    """300 hosts with 128 open files allowed: saved in batches, each batch's folders closed before
    the next (one batch for all ran out of descriptors, and no host at all was saved)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _MANY_HOSTS, str(tmp_path / "facts"), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["32", "{}"]
    assert len(list((tmp_path / "facts").glob("*.json"))) == 300
    assert load_host(tmp_path / "facts", "n0299").host == "n0299"
    assert set(read_capture_dir(tmp_path / "facts" / "n0150")) == {"numactl-H", "ppc64_cpu-info", "openmpi"}
