"""The facts directory: ``<dir>/<host>.json`` plus each raw capture as ``<dir>/<host>/<name>.txt``.

The raw files use the same layout ``provision probe --replay`` and ``capture-script`` use, so a
facts directory can itself be replayed.
"""

from __future__ import annotations

import json
from pathlib import Path

from provision.errors import FactsError
from provision.facts.model import HostFacts
from provision.files import write_atomic
from provision.gather import CAPTURE_NAMES, Capture
from provision.inventory import HOST_NAME

DEFAULT_FACTS_DIR = Path("inventory/facts")


def save_host(facts_dir: Path, facts: HostFacts, captures: dict[str, Capture]) -> Path:
    """Write one host's facts JSON and raw captures; stale captures from an earlier probe go.

    Only known capture names become files, and only inside the host's folder: a name is
    something a node sent (see :func:`provision.gather.split_output`), so it is checked here
    again. Raises :class:`FactsError` for a bad host or capture name, before writing anything.
    """
    if not HOST_NAME.match(facts.host):
        raise FactsError(f"{facts.host!r} is not a host name: facts not saved")
    unknown = sorted(name for name in captures if name not in CAPTURE_NAMES)
    if unknown:
        raise FactsError(f"{facts.host}: unknown capture name(s) {unknown[:3]!r}: facts not saved")
    host_dir = facts_dir / facts.host
    host_dir.mkdir(parents=True, exist_ok=True)
    for name, capture in captures.items():
        target = host_dir / f"{name}.txt"
        if target.parent != host_dir:  # belt and braces: CAPTURE_NAMES hold no "/"
            raise FactsError(f"{facts.host}: capture {name!r} would be written outside {host_dir}")
        if capture.available:
            write_atomic(target, capture.stdout, backup=False)
        elif target.exists() and name in CAPTURE_NAMES:
            target.unlink()  # the command is gone now: a leftover file would lie
    path = facts_dir / f"{facts.host}.json"
    write_atomic(path, json.dumps(facts.to_dict(), indent=2, sort_keys=True) + "\n", backup=False)
    return path


def load_host(facts_dir: Path, host: str) -> HostFacts:
    """Read ``<facts_dir>/<host>.json``; missing or corrupt files raise :class:`FactsError`."""
    if not HOST_NAME.match(host):  # the name becomes a file path
        raise FactsError(f"{host!r} is not a host name (letters, digits, '.', '_', '-')")
    path = facts_dir / f"{host}.json"
    if not path.exists():
        raise FactsError(f"no facts for host {host} in {facts_dir}/ (run `provision probe {host}` first)")
    try:
        data = json.loads(path.read_text())
        return HostFacts.from_dict(data)
    except (ValueError, KeyError, TypeError) as error:
        raise FactsError(f"{path}: corrupt facts file ({type(error).__name__}: {error}); run `provision probe {host}` again") from None


def cached_hosts(facts_dir: Path) -> list[str]:
    """Hosts that have a facts file, sorted."""
    return sorted(path.stem for path in facts_dir.glob("*.json")) if facts_dir.is_dir() else []


def read_capture_dir(host_dir: Path) -> dict[str, str]:
    """``<name>.txt`` files of one host folder -> {name: text}; unknown names are ignored."""
    return {
        path.stem: path.read_text(errors="replace")
        for path in sorted(host_dir.glob("*.txt"))
        if path.stem in CAPTURE_NAMES
    }
