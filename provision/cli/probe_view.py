"""How `provision probe` shows its results (:func:`show`): the per-host table, or, for a large run
(more than :data:`TABLE_LIMIT` hosts, or ``--quiet``), a summary of what differs and what failed;
and its progress bar on a terminal (:class:`Progress`).

The summary groups hosts whose table row would read the same (:func:`provision.probe.report.row_of`)
and prints one line per group, the largest first, hosts folded into a hostlist; failures are
grouped the same way, one line per distinct error. The whole table is one flag away (``--table``); ``--json`` has every detail.
Plain text: no rich table for hundreds of rows (0.5 s at 128 hosts, issue 28).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import typer

from provision.cli.output import error, stderr, stdout
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


class Progress:
    """A progress bar on stderr while more than one host is probed (``shown``: a terminal, not
    --json), advanced by each result (not by a thread of its own: worker processes are forked)."""

    def __init__(self, shown: bool):
        self.shown, self.bar, self.task = shown, None, None

    def __enter__(self) -> Progress:
        return self

    def start(self, total: int) -> None:
        """The hosts to probe are known: draw the bar (above one host)."""
        if not self.shown or total <= 1:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

        columns = (TextColumn("probing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        self.bar = Bar(*columns, console=stderr(), transient=True, auto_refresh=False)
        self.bar.start()
        self.task = self.bar.add_task("probe", total=total)

    def advance(self, _result: ProbeResult) -> None:
        """One host is done."""
        if self.bar is not None:
            self.bar.advance(self.task)
            self.bar.refresh()

    def __exit__(self, *_exc) -> None:
        if self.bar is not None:
            self.bar.stop()


def show(run, save: bool, *, as_json: bool, table: bool, quiet: bool, topology: bool) -> None:
    """JSON, the table or the summary on stdout; the failures once on stderr (the table: one line
    per host; the summary: one line per distinct error, hosts folded)."""
    from provision.probe.report import failure_lines, results_json

    results = run.results
    summary = use_summary(results, quiet, table)
    saved = save and len(run.unsaved) < sum(r.ok for r in results)
    if as_json:
        typer.echo(results_json(results))
    else:
        from provision.probe.report import print_table, print_topology

        if summary:
            for line in summary_lines(results):
                typer.echo(line)
        else:
            print_table(results, stdout())
        if topology or (len(results) == 1 and not summary):  # asked for, or one host's table
            for result in results:
                if result.facts is not None:
                    print_topology(result.facts, stdout())
        if saved:
            typer.echo(f"facts saved in {run.facts_dir}/")
    failures = failure_groups(results) if summary and not as_json else failure_lines(results)
    if failures:
        from rich.markup import escape

        for line in failures:
            stderr().print(escape(line), highlight=False, soft_wrap=True, style="red")
    for line in run.unsaved:
        error(line)
