"""The facts directory: ``<dir>/<host>.json`` plus each raw capture as ``<dir>/<host>/<name>.txt``.

The raw files use the same layout ``provision probe --replay`` and ``capture-script`` use, so a
facts directory can itself be replayed.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import resource
import shlex
from collections.abc import Iterable
from pathlib import Path

from provision import defaults
from provision.errors import FactsError, ProvisionError
from provision.facts.model import HostFacts
from provision.files import READ_LIMIT, StagedFiles, open_dir, private_dir, read_regular
from provision.inventory.model import HOST_NAME
from provision.probe.gather import CAPTURE_NAMES, Capture
from provision.text import shown_value

DEFAULT_FACTS_DIR = defaults.FACTS_DIR  # facts/ beside the inventory when there is none (defaults.facts_folder)


def save_host(facts_dir: Path, facts: HostFacts, captures: dict[str, Capture]) -> Path:
    """Write one host's facts JSON and raw captures (see :func:`save_hosts`); raises the host's
    error (:class:`FactsError`, :class:`UnsafeFileError`, OSError); returns the JSON's path."""
    save_hosts(facts_dir, [(facts, captures)], raise_first=True)
    return facts_dir / f"{facts.host}.json"


def save_hosts(
    facts_dir: Path, hosts: Iterable[tuple[HostFacts, dict[str, Capture]]], *, raise_first: bool = False
) -> dict[str, str]:
    """Write each host's facts JSON and raw captures; stale captures from an earlier probe go.
    Returns ``{host: why}`` for the hosts not saved (the others are); a facts folder that
    cannot be used raises (:class:`UnsafeFileError`, OSError) and saves none.

    The facts folder is made 0755 when missing (users plan from its JSON files, mode 0644); each
    host's raw captures go in ``<host>/``, made 0700, each file 0600 (raw node text, or a replayed
    folder's text: shown to no one else). The folders must be yours or root's and writable by no
    one else (OpenSSH's StrictModes rule), and no name is followed if it is a link.

    Hosts are saved in batches of :func:`batch_size` (a host's folder stays open until its batch
    is in place). Every file is written as a new temporary file; a batch costs one sync of the
    filesystem, then the renames, then one more sync (:class:`provision.files.StagedFiles`): a
    crash leaves each file whole, old or new, never half written, and a host's JSON is renamed
    after its captures.

    Only known capture names become files, and only inside the host's folder: a name is
    something a node sent (see :func:`provision.probe.gather.split_output`), so it is checked here
    again, before writing anything of that host.
    """
    problems: dict[str, str] = {}
    pending = iter(hosts)
    size = batch_size()
    while batch := list(itertools.islice(pending, size)):
        top = None
        with StagedFiles() as staged:
            for facts, captures in batch:
                mark = staged.mark()
                try:
                    _check_host(facts, captures)
                    if top is None:  # made only when there is something to save
                        top = staged.keep_open(private_dir(facts_dir, mode=0o755))
                    _stage_host(staged, top, facts_dir, facts, captures)
                except (ProvisionError, OSError) as error:
                    staged.discard(mark)
                    if raise_first:
                        raise
                    where = getattr(error, "filename", None)
                    problems[facts.host] = (
                        f"{where}: {error.strerror}" if isinstance(error, OSError) and where and error.strerror else str(error)
                    )
    return problems


BATCH_MOST = 256  # hosts per batch at most: 2 syncs per 256 hosts cost little next to their writes


def batch_size() -> int:
    """Hosts saved per batch (one sync before their renames, one after): each host's folder stays
    open until its batch is renamed into place, so a batch holds at most a quarter of the open
    files this process may have (RLIMIT_NOFILE's soft limit, often 1024), and at most
    :data:`BATCH_MOST`. One batch for every host ran out of descriptors at 1024 hosts, and every
    host of the run went unsaved (issue 37).

    >>> 16 <= batch_size() <= BATCH_MOST
    True
    """
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return BATCH_MOST
    return max(16, min(BATCH_MOST, soft // 4))


def _check_host(facts: HostFacts, captures: dict[str, Capture]) -> None:
    if not HOST_NAME.match(facts.host):
        raise FactsError(f"{shown_value(facts.host)} is not a host name: facts not saved")
    unknown = sorted(name for name in captures if name not in CAPTURE_NAMES)
    if unknown:
        raise FactsError(f"{facts.host}: unknown capture name(s) {shown_value(unknown[:3])}: facts not saved")


def _stage_host(staged: StagedFiles, top: int, facts_dir: Path, facts: HostFacts, captures: dict[str, Capture]) -> None:
    host_dir = staged.keep_open(private_dir(facts.host, dir_fd=top, mode=0o700, shown=facts_dir / facts.host))
    os.fchmod(host_dir, 0o700)  # a folder an older provision made 0755 holds raw captures too
    for name, capture in captures.items():
        if capture.available:
            staged.add(host_dir, f"{name}.txt", capture.stdout.encode(errors="surrogateescape"))
        else:
            staged.remove(host_dir, f"{name}.txt")  # the command is gone now: a leftover file would lie
    text = json.dumps(facts.to_dict(), indent=2, sort_keys=True) + "\n"
    staged.add(top, f"{facts.host}.json", text.encode(), 0o644)


def probe_command(host: str, facts_dir: Path, inventory: Path | None = None) -> str:
    """The ``provision probe`` line that writes ``host``'s facts into ``facts_dir``, to paste:
    ``-i`` when the inventory is not the default one (the host is reached as it says), and
    ``--facts-dir`` (quoted) always, as the folder was named.

    >>> probe_command("node01", Path("inventory/facts"))
    'provision probe node01 --facts-dir inventory/facts'
    >>> probe_command("n1", Path("/srv/my cluster/facts"), Path("/srv/my cluster/hosts.yml"))
    "provision probe n1 -i '/srv/my cluster/hosts.yml' --facts-dir '/srv/my cluster/facts'"
    """
    from provision.inventory.model import DEFAULT_INVENTORY

    named = f" -i {shlex.quote(str(inventory))}" if inventory is not None and Path(inventory) != DEFAULT_INVENTORY else ""
    return f"provision probe {host}{named} --facts-dir {shlex.quote(str(facts_dir))}"


def load_host(facts_dir: Path, host: str, inventory: Path | None = None) -> HostFacts:
    """Read ``<facts_dir>/<host>.json``; missing or corrupt files raise :class:`FactsError`, whose
    hint is the probe command to run (``inventory``: the one the caller reads hosts from)."""
    if not HOST_NAME.match(host):  # the name becomes a file path
        raise FactsError(f"{shown_value(host)} is not a host name (letters, digits, '.', '_', '-')")
    path = facts_dir / f"{host}.json"
    again = probe_command(host, facts_dir, inventory)
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        raise FactsError(
            f"no facts for host {host}: looked for {path.absolute()} (run `{again}` first: it writes them there)"
        ) from None
    try:
        data = json.loads(raw)
        problem = _text_problem(data, host)
        if problem:
            raise FactsError(f"{path}: {problem}; run `{again}` again")
        return HostFacts.from_dict(data)
    except (ValueError, KeyError, TypeError) as error:
        raise FactsError(f"{path}: corrupt facts file ({type(error).__name__}: {error}); run `{again}` again") from None


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
            return (
                f"field {shown_value(field)} is {shown_value(str(value)[:60])}, not a host name (letters, digits, '.', '_', '-')"
            )
    if data["host"] != host:
        return f"field 'host' is {shown_value(data['host'])} but the file name says {shown_value(host)}"
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
                return f"field {shown_value(where)} holds a line break ({shown_value(value[:60])})"
            if _CONTROL.search(value) and not where.startswith(_FREE_TEXT):
                return f"field {shown_value(where)} holds a control character ({shown_value(value[:60])})"
    return None


def cached_hosts(facts_dir: Path) -> list[str]:
    """Hosts that have a facts file, sorted."""
    return sorted(path.stem for path in facts_dir.glob("*.json")) if facts_dir.is_dir() else []


def read_capture_dir(host_dir: Path, *, dir_fd: int | None = None) -> dict[str, str]:
    """The ``<name>.txt`` files of one host folder -> {name: text}; other names are ignored.

    The folder (its last part, relative to ``dir_fd`` when given) and each file are opened without
    following a link; each file must be a regular file owned by the folder's owner (no hard link
    to another user's file, root's included), and all of them together at most
    :data:`provision.files.READ_LIMIT` bytes. Else :class:`provision.errors.UnsafeFileError`
    naming the file."""
    folder = open_dir(host_dir if dir_fd is None else host_dir.name, dir_fd=dir_fd)
    try:
        owners = (os.fstat(folder).st_uid,)
        texts, left = {}, READ_LIMIT
        for name in CAPTURE_NAMES:
            try:
                data = read_regular(f"{name}.txt", dir_fd=folder, limit=left, owners=owners, shown=host_dir / f"{name}.txt")
            except FileNotFoundError:
                continue
            left -= len(data)
            texts[name] = data.decode(errors="replace")
        return texts
    finally:
        os.close(folder)
