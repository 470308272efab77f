"""Parser for the ``sysfs-cpu`` capture: each online CPU's core, package and NUMA node from sysfs.

The capture (gather.py's ``sysfs-cpu`` step) has two kinds of lines::

    CPU,CORE_ID,PACKAGE_ID,NODE                                      one per online CPU (NODE may be empty)
    /sys/devices/system/cpu/cpuN/topology/core_cpus_list:0-1        or thread_siblings_list
    /sys/devices/system/cpu/cpuN/topology/package_cpus_list:0-15    or core_siblings_list

Captures made before the sibling lists were added have only the first kind. With the lists, CPUs
are grouped into cores and packages by which CPUs share them, as hwloc does: ``core_id`` alone
merges cores on hybrid ARM chips (it restarts in every cluster) and POWER LPARs and SPARC report
``physical_package_id`` -1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from provision.errors import ParseError
from provision.facts.cpulist import parse_cpulist
from provision.facts.lscpu import CpuRow
from provision.facts.registry import Fact
from provision.text import shown_value

# `read` is a shell builtin: no process per file, which matters on 160-CPU POWER nodes.
# Then which CPUs share a core and a package, as hwloc reads them: core_id and the package id
# alone mislead (hybrid ARM restarts core_id per cluster; POWER LPARs give package id -1). One
# grep for all CPUs: these lists are binary attributes that dash's byte-wise `read` gets empty.
SOURCE = Fact(
    "sysfs-cpu",
    (),
    "for d in /sys/devices/system/cpu/cpu[0-9]*; do "
    "n=${d##*/cpu}; on=1; "
    '[ -r "$d/online" ] && read -r on <"$d/online"; '
    '[ "$on" = 0 ] && continue; '
    '[ -r "$d/topology/core_id" ] || continue; '
    'read -r core <"$d/topology/core_id"; pkg=-1; read -r pkg <"$d/topology/physical_package_id"; '
    'node=; for l in "$d"/node[0-9]*; do [ -e "$l" ] && node=${l##*/node}; done; '
    'echo "$n,$core,$pkg,$node"; '
    "done; "
    'if [ -r "$d/topology/core_cpus_list" ]; then a=core_cpus_list; b=package_cpus_list; '
    "else a=thread_siblings_list; b=core_siblings_list; fi; "
    'grep -H . /sys/devices/system/cpu/cpu[0-9]*/topology/"$a" /sys/devices/system/cpu/cpu[0-9]*/topology/"$b" '
    "2>/dev/null; true",
    "fallback topology from /sys/devices/system/cpu, with core and package sibling lists",
)
MAX_CPUS = 65_536

_ROW = re.compile(r"^(\d{1,6}),(-?\d{1,10}),(-?\d{1,10}),(\d{0,6})\Z")
_LIST = re.compile(r"/cpu(\d{1,6})/topology/(core_cpus_list|thread_siblings_list|package_cpus_list|core_siblings_list):(.*)\Z")
_CORE_LISTS = ("core_cpus_list", "thread_siblings_list")
_PACKAGE_LISTS = ("package_cpus_list", "core_siblings_list")


@dataclass(frozen=True)
class SysfsCpus:
    """Rows ready for grouping by (socket, core); ``siblings`` tells whether sibling lists were used."""

    rows: tuple[CpuRow, ...]
    siblings: bool


def _cpu_set(text: str, line: int | None) -> frozenset[int]:
    """A sysfs CPU list, expanded only when it stays under :data:`MAX_CPUS`."""
    total = 0
    for part in text.strip().split(","):
        first, _, last = part.partition("-")
        if not (
            first.isascii()
            and first.isdigit()
            and len(first) <= 6
            and (not last or (last.isascii() and last.isdigit() and len(last) <= 6))
        ):
            raise ParseError(SOURCE.name, f"bad CPU list {shown_value(text[:40])}", line)
        total += (int(last) - int(first) + 1) if last else 1
        if total > MAX_CPUS:
            raise ParseError(SOURCE.name, f"CPU list of over {MAX_CPUS} CPUs", line)
    return frozenset(parse_cpulist(text, SOURCE.name, line))


def _groups(
    cpus: list[int], lists: dict[int, dict[str, str]], names: tuple[str, ...], number: dict[int, int]
) -> dict[int, frozenset[int]]:
    """CPU -> the online CPUs that share its core (or package), checked to be a partition."""
    online = frozenset(cpus)
    by_text: dict[str, frozenset[int]] = {}
    canonical: dict[frozenset[int], frozenset[int]] = {}
    group_of: dict[int, frozenset[int]] = {}
    for cpu in cpus:
        text = next((lists[cpu][name] for name in names if name in lists.get(cpu, {})), None)
        if text is None:
            raise ParseError(SOURCE.name, f"CPU {cpu} has no {names[0]} / {names[1]} line")
        if text not in by_text:
            group = _cpu_set(text, number.get(cpu)) & online
            by_text[text] = canonical.setdefault(group, group)
        group_of[cpu] = by_text[text]
        if cpu not in group_of[cpu]:
            raise ParseError(SOURCE.name, f"CPU {cpu} is missing from its own {names[0]}", number.get(cpu))
    for group in canonical.values():
        if any(group_of[member] is not group for member in group):
            raise ParseError(SOURCE.name, f"{names[0]} of CPUs {sorted(group)[:4]}... disagree: not a partition")
    return group_of


@SOURCE.parses
def parse_sysfs_cpu(text: str) -> SysfsCpus:
    """Parse the ``sysfs-cpu`` capture into one :class:`CpuRow` per online CPU.

    With sibling lists, ``socket`` is the package id when every package has its own id (else the
    package's rank by first CPU) and ``core`` the core id when it names each core once within its
    package (else the core's first CPU). Raises :class:`ParseError` on anything else, including a
    package id of -1 in an old capture without sibling lists.
    """
    raw: list[tuple[int, int, int, int | None, int]] = []
    lists: dict[int, dict[str, str]] = {}
    list_line: dict[int, int] = {}
    seen: set[int] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        listed = _LIST.search(line)
        if listed and line.startswith("/"):
            lists.setdefault(int(listed.group(1)), {})[listed.group(2)] = listed.group(3)
            list_line.setdefault(int(listed.group(1)), number)
            continue
        match = _ROW.match(line)
        if not match:
            raise ParseError(
                SOURCE.name, f"expected CPU,CORE,PACKAGE,NODE or a sibling list, got {shown_value(line[:60])}", number
            )
        cpu, core, package = int(match.group(1)), int(match.group(2)), int(match.group(3))
        if cpu in seen:
            raise ParseError(SOURCE.name, f"CPU {cpu} listed twice", number)
        if len(seen) >= MAX_CPUS:
            raise ParseError(SOURCE.name, f"more than {MAX_CPUS} CPUs", number)
        seen.add(cpu)
        raw.append((cpu, core, package, int(match.group(4)) if match.group(4) else None, number))
    if not raw:
        raise ParseError(SOURCE.name, "no CPU rows")
    if not lists:
        for cpu, core, package, _node, number in raw:
            if core < 0 or package < 0:
                raise ParseError(
                    SOURCE.name,
                    f"CPU {cpu} has core/package id {core}/{package} and the capture has no sibling lists: capture again",
                    number,
                )
        return SysfsCpus(tuple(CpuRow(cpu, core, package, node) for cpu, core, package, node, _ in raw), False)

    cpus = [entry[0] for entry in raw]
    packages = _groups(cpus, lists, _PACKAGE_LISTS, list_line)
    cores = _groups(cpus, lists, _CORE_LISTS, list_line)
    for cpu in cpus:
        if not cores[cpu] <= packages[cpu]:
            raise ParseError(SOURCE.name, f"CPU {cpu}: its core's CPUs are not all in its package", list_line.get(cpu))
    core_id = {entry[0]: entry[1] for entry in raw}
    package_id = {entry[0]: entry[2] for entry in raw}
    package_groups = sorted(set(packages.values()), key=min)
    ids = [{package_id[cpu] for cpu in group} for group in package_groups]
    if all(len(one) == 1 and min(one) >= 0 for one in ids) and len({min(one) for one in ids}) == len(ids):
        socket_of = {group: min(one) for group, one in zip(package_groups, ids, strict=False)}
    else:
        socket_of = {group: rank for rank, group in enumerate(package_groups)}
    core_groups = set(cores.values())
    named = {(socket_of[packages[min(group)]], frozenset(core_id[cpu] for cpu in group)) for group in core_groups}
    by_id = all(len(ids_of_core) == 1 and min(ids_of_core) >= 0 for _, ids_of_core in named) and len(
        {(socket, min(ids_of_core)) for socket, ids_of_core in named}
    ) == len(core_groups)
    rows = tuple(
        CpuRow(cpu, core_id[cpu] if by_id else min(cores[cpu]), socket_of[packages[cpu]], node)
        for cpu, _core, _package, node, _ in raw
    )
    return SysfsCpus(rows, True)


def same_grouping(first: tuple[CpuRow, ...], second: tuple[CpuRow, ...]) -> bool:
    """True when both sources put the same CPUs together in cores and in sockets."""

    def partition(rows: tuple[CpuRow, ...], key) -> set[frozenset[int]]:
        groups: dict[tuple[int, ...], set[int]] = {}
        for row in rows:
            groups.setdefault(key(row), set()).add(row.cpu)
        return {frozenset(group) for group in groups.values()}

    return all(
        partition(first, key) == partition(second, key) for key in (lambda row: (row.socket, row.core), lambda row: (row.socket,))
    )
