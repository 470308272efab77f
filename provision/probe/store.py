"""The facts directory: ``<dir>/<host>.json`` plus each raw capture as ``<dir>/<host>/<name>.txt``.

The raw files use the same layout ``provision probe --replay`` and ``capture-script`` use, so a
facts directory can itself be replayed.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from provision.errors import FactsError
from provision.facts.model import HostFacts
from provision.files import write_atomic
from provision.inventory.model import HOST_NAME
from provision.probe.gather import CAPTURE_NAMES, Capture

DEFAULT_FACTS_DIR = Path("inventory/facts")


def save_host(facts_dir: Path, facts: HostFacts, captures: dict[str, Capture]) -> Path:
    """Write one host's facts JSON and raw captures; stale captures from an earlier probe go.

    Only known capture names become files, and only inside the host's folder: a name is
    something a node sent (see :func:`provision.probe.gather.split_output`), so it is checked here
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


def facts_folder(inventory: Path | None) -> Path:
    """The facts folder when none is named: ``facts/`` beside the inventory file (so
    ``inventory/facts`` for the default ``inventory/hosts.yml``), whatever the current directory;
    ``inventory/facts`` without an inventory. One rule for every command that reads or writes
    facts (probe, rankfile, launch, topology, slurm-gres, setup-cluster's Slurm role); a folder
    named on the command line is taken as given (relative to where the command runs).

    >>> str(facts_folder(Path("/srv/cluster/hosts.yml"))), str(facts_folder(None))
    ('/srv/cluster/facts', 'inventory/facts')
    """
    return Path(inventory).parent / "facts" if inventory is not None else DEFAULT_FACTS_DIR


def load_host(facts_dir: Path, host: str) -> HostFacts:
    """Read ``<facts_dir>/<host>.json``; missing or corrupt files raise :class:`FactsError`."""
    if not HOST_NAME.match(host):  # the name becomes a file path
        raise FactsError(f"{host!r} is not a host name (letters, digits, '.', '_', '-')")
    path = facts_dir / f"{host}.json"
    if not path.exists():
        raise FactsError(
            f"no facts for host {host}: looked for {path.absolute()} "
            f"(run `provision probe {host} --facts-dir {shlex.quote(str(facts_dir))}` first: it writes them there)"
        )
    try:
        data = json.loads(path.read_text())
        problem = _text_problem(data, host)
        if problem:
            raise FactsError(f"{path}: {problem}; run `provision probe {host}` again")
        return HostFacts.from_dict(data)
    except (ValueError, KeyError, TypeError) as error:
        raise FactsError(
            f"{path}: corrupt facts file ({type(error).__name__}: {error}); run `provision probe {host}` again"
        ) from None


# Line breaks (every one str.splitlines() honours) may be in no field: facts end up in rank files,
# hostfiles, slurm.conf lines and terminals. Other control characters (an ANSI escape...) may be in
# no field either, except the free-text reasons in ``unavailable`` (the first line of a failed
# command's stderr, never written to a file or printed from here), so a facts file provision wrote
# itself always loads.
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_FREE_TEXT = "unavailable."


def _text_problem(data: object, host: str) -> str | None:
    """Why the JSON of ``<host>.json`` cannot be trusted as text, or None (names the field)."""
    if not isinstance(data, dict):
        return "corrupt facts file (not a JSON object)"
    for field in ("host", "hostname"):
        value = data.get(field)
        if not isinstance(value, str) or not HOST_NAME.match(value):
            return f"field {field!r} is {str(value)[:60]!r}, not a host name (letters, digits, '.', '_', '-')"
    if data["host"] != host:
        return f"field 'host' is {data['host']!r} but the file name says {host!r}"
    stack: list[tuple[str, object]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{where}.{key}" if where else str(key), item) for key, item in value.items())
            stack.extend((f"{where} key", key) for key in value)
        elif isinstance(value, list):
            stack.extend((f"{where}[{index}]", item) for index, item in enumerate(value))
        elif isinstance(value, str):
            if _LINE_BREAK.search(value):
                return f"field {where!r} holds a line break ({value[:60]!r})"
            if _CONTROL.search(value) and not where.startswith(_FREE_TEXT):
                return f"field {where!r} holds a control character ({value[:60]!r})"
    return None


def cached_hosts(facts_dir: Path) -> list[str]:
    """Hosts that have a facts file, sorted."""
    return sorted(path.stem for path in facts_dir.glob("*.json")) if facts_dir.is_dir() else []


def read_capture_dir(host_dir: Path) -> dict[str, str]:
    """``<name>.txt`` files of one host folder -> {name: text}; unknown names are ignored."""
    return {path.stem: path.read_text(errors="replace") for path in sorted(host_dir.glob("*.txt")) if path.stem in CAPTURE_NAMES}
