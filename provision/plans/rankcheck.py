"""Check an existing rank file against probed facts: which lines name cores that do not exist.

Reads OpenMPI's ``rank N=host slot=S:C[-C][,C...]`` lines (``#`` comments and blank lines are
skipped). A syntax error names its line; so does every reference to a missing host, socket or core.
A host given more ranks than it has GPUs is named too: a rank's GPU is its local rank (the order
of its rank among its host's, which is how OpenMPI numbers ``OMPI_COMM_WORLD_LOCAL_RANK``), so the
extra ranks have no GPU of their own, and ``LOCAL_RANK % GPUs`` would put two ranks on one GPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from provision.errors import PlanError
from provision.facts.model import HostFacts
from provision.text import shown_value

_LINE = re.compile(r"^rank\s+(\d+)\s*=\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s+slot\s*=\s*(\S+)\Z")
_SLOT = re.compile(r"^(\d+):(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)\Z")


@dataclass(frozen=True)
class RankLine:
    """One parsed line of a rank file."""

    line: int
    rank: int
    host: str
    socket: int
    cores: tuple[int, ...]
    text: str


def parse_rankfile(text: str, path: str = "rankfile") -> list[RankLine]:
    """Parse a rank file; raises :class:`PlanError` naming ``path:line`` on a syntax error."""
    lines = []
    seen: dict[int, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.match(stripped)
        if not match:
            raise PlanError(f"{path}:{number}: expected 'rank N=host slot=S:C-C', got {shown_value(stripped[:60])}")
        slot = _SLOT.match(match.group(3))
        if not slot:
            raise PlanError(f"{path}:{number}: slot {shown_value(match.group(3))} is not socket:cores (e.g. 0:0-4)")
        cores: list[int] = []
        for part in slot.group(2).split(","):
            first, _, last = part.partition("-")
            if last and int(last) < int(first):
                raise PlanError(f"{path}:{number}: descending core range {shown_value(part)}")
            cores.extend(range(int(first), int(last or first) + 1))
        rank = int(match.group(1))
        if rank in seen:
            raise PlanError(f"{path}:{number}: rank {rank} already given on line {seen[rank]}")
        seen[rank] = number
        lines.append(RankLine(number, rank, match.group(2), int(slot.group(1)), tuple(cores), stripped))
    if not lines:
        raise PlanError(f"{path}: no 'rank N=host slot=...' lines")
    missing = sorted(set(range(len(lines))) - set(seen))
    if missing:
        raise PlanError(f"{path}: ranks must be 0..{len(lines) - 1}; missing {missing[:10]}")
    return lines


def check_rankfile(
    lines: list[RankLine],
    facts_by_host: dict[str, HostFacts],
    path: str = "rankfile",
    probe_hint: Callable[[str], str] = lambda host: f"provision probe {host}",
) -> list[str]:
    """Problems, one per offending line (empty when every host, socket and core exists);
    ``probe_hint(host)``: the command that probes a host without facts."""
    problems = []
    for entry in lines:
        facts = facts_by_host.get(entry.host)
        where = f"{path}:{entry.line}: {entry.text}"
        if facts is None:
            problems.append(f"{where}: no facts for host {entry.host} (run `{probe_hint(entry.host)}`)")
            continue
        sockets = facts.cpu.sockets
        if entry.socket >= len(sockets):
            problems.append(
                f"{where}: host {entry.host} has {len(sockets)} socket(s) (0-{len(sockets) - 1}), not socket {entry.socket}"
            )
            continue
        available = len(sockets[entry.socket].cores)
        beyond = [core for core in entry.cores if core >= available]
        if beyond:
            problems.append(
                f"{where}: host {entry.host} socket {entry.socket} has cores 0-{available - 1}; "
                f"core(s) {beyond[0]}{'-' + str(beyond[-1]) if len(beyond) > 1 else ''} do not exist"
            )
    return problems


def gpu_problems(lines: list[RankLine], facts_by_host: dict[str, HostFacts], path: str = "rankfile") -> list[str]:
    """One line per host with GPUs that the rank file gives more ranks than GPUs, naming what each
    rank would get (its local rank's GPU, or none)."""
    problems = []
    for host in dict.fromkeys(entry.host for entry in lines):
        facts = facts_by_host.get(host)
        ranks = sorted(entry.rank for entry in lines if entry.host == host)
        if facts is None or not facts.gpus or len(ranks) <= len(facts.gpus):
            continue
        gpus = sorted(gpu.index for gpu in facts.gpus)
        shown = ", ".join(f"rank {r} {f'GPU {gpus[k]}' if k < len(gpus) else 'none'}" for k, r in enumerate(ranks[:16]))
        shown = shown.replace(" GPU", " gets GPU", 1)
        problems.append(
            f"{path}: host {host}: {len(ranks)} ranks but {len(gpus)} GPU(s); by local rank, {shown}"
            f"{' ...' if len(ranks) > 16 else ''}: a rank past the GPUs has none of its own (by LOCAL_RANK % {len(gpus)} "
            f"two ranks would share one, which NCCL refuses); give {host} at most {len(gpus)} ranks"
        )
    return problems


def check_rankfile_file(path: Path, facts_dir: Path, inventory: Path | None = None) -> tuple[list[str], int, list[str]]:
    """``rankfile --check FILE``: the problems of the rank file at ``path`` against the facts in
    ``facts_dir`` (one line each), its rank count, and one line per host whose facts file is there
    but unusable (an absent one is a problem of each line that names it). A file that cannot be
    read raises :class:`ProvisionError` naming it."""
    from provision.errors import FactsError, ProvisionError
    from provision.probe.store import load_host, probe_command

    try:
        text = path.read_text()
    except OSError as error:
        raise ProvisionError(f"{path}: cannot read: {error.strerror}") from None
    lines = parse_rankfile(text, str(path))
    facts, unusable = {}, []
    for name in sorted({line.host for line in lines}):
        try:
            facts[name] = load_host(facts_dir, name, inventory)
        except FactsError as error:
            if (facts_dir / f"{name}.json").exists():  # corrupt: say so once; absent: per line
                unusable.append(str(error))
    hint = lambda host: probe_command(host, facts_dir, inventory)  # noqa: E731
    return check_rankfile(lines, facts, str(path), hint) + gpu_problems(lines, facts, str(path)), len(lines), unusable
