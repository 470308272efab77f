"""How `provision probe` shows its results: the per-host table, or, for a large run (more than
:data:`TABLE_LIMIT` hosts, or ``--quiet``), a summary of what differs and what failed.

The summary groups hosts whose table row would read the same (:func:`provision.probe.report.row_of`)
and prints one line per group, the largest first, hosts folded into a hostlist; failures are
grouped the same way, one line per distinct error. The whole table is one flag away (``--table``); ``--json`` has every detail.
Plain text: no rich table for hundreds of rows (0.5 s at 128 hosts, issue 28).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from provision.probe.report import columns, heterogeneity, row_of
from provision.probe.run import ProbeResult
from provision.text import shown

TABLE_LIMIT = 32  # hosts: a screenful of rows; above it, the summary unless --table


def _hostlist(names: list[str]) -> str:
    from provision.plans.hostlist import folded

    return folded(names)


def summary_lines(results: list[ProbeResult]) -> list[str]:
    """``128 hosts: 126 ok, 2 failed``, then one line per group of hosts alike (largest first):
    ``  124  node[001-124]  ppc64le  2x10x8 ...``, the notes counted, the heterogeneity verdict."""
    ok = [result for result in results if result.facts is not None]
    failed = [result for result in results if result.facts is None]
    lines = [f"{len(results)} hosts: {len(ok)} ok" + (f", {len(failed)} failed" if failed else "")]
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for result in ok:
        groups[row_of(result.facts)].append(result.host)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))
    if ordered:
        rows = [(str(len(hosts)), _hostlist(hosts), *cells) for cells, hosts in ordered]
        header = ("hosts", "names", *columns())
        widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
        for row in (header, *rows):
            lines.append("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    notes = Counter(note for result in ok for note in result.facts.notes)
    for note, count in notes.most_common():
        lines.append(f"note ({count} hosts): {note}")
    lines.extend(heterogeneity(results)[:1])
    return [shown(line, newlines=False) for line in lines]  # node text: its control characters escaped


def failure_groups(results: list[ProbeResult]) -> list[str]:
    """One line per distinct failure, ``node[07,19]: unreachable: Connection refused``, the most
    common first; a message naming its host reads ``<host>`` in it, so that hosts failing alike
    share a line (the table's form, one line per host, is :func:`provision.probe.report.failure_lines`)."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for result in results:
        if not result.ok:
            message = (result.error or "").replace(result.host, "<host>")
            groups[(result.error_kind or "failed", message)].append(result.host)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))
    return [shown(f"{_hostlist(hosts)}: {kind}: {message}", newlines=False) for (kind, message), hosts in ordered]


def use_summary(results: list[ProbeResult], quiet: bool, table: bool) -> bool:
    """The summary instead of the table: with --quiet, or above :data:`TABLE_LIMIT` hosts without --table."""
    return quiet or (len(results) > TABLE_LIMIT and not table)
