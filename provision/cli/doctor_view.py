"""How `provision doctor` shows what it found: the table of checks and the verdict line, what
--drain did, the --json document, the report page (on stdout or written), --node-script's script,
and --timings."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from provision.cli.output import fail, stdout, write_or_print

_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}


def show(outcome, *, as_json: bool, strict: bool, timings: bool, page_out: Path | None, script_out: Path | None) -> int:
    """Print ``outcome`` (a :class:`provision.doctor.service.DoctorOutcome`) as asked; the exit code."""
    if outcome.script is not None:  # --node-script
        write_or_print(outcome.script, None if str(script_out) == "-" else script_out, "node check")
        return 0
    if outcome.run is None:  # --from-json: the saved run's page only
        write_page(outcome.page, page_out)
        return 0
    if timings:
        typer.echo(json.dumps({"doctor_timings": outcome.run.timings()}), err=True)
    if as_json:
        typer.echo(json.dumps(outcome.document, indent=2))
        code = outcome.document["verdict"]["exit_code"]
    elif outcome.page is not None and page_out is None:
        code = outcome.document["verdict"]["exit_code"]  # --report -: the page is stdout
    else:
        code = print_checks(outcome.run.results, stdout(), strict)
        if outcome.drained is not None:
            code = print_marks(outcome.drained, stdout()) or code
    if outcome.page is not None:
        write_page(outcome.page, page_out)
    return code


def print_checks(results, console, strict: bool = False) -> int:
    """The table (check, status, hosts, detail) and the verdict line; returns the exit code."""
    from rich.markup import escape
    from rich.table import Table

    from provision.doctor.verdict import verdict

    table = Table(show_lines=False)
    for column in ("check", "status", "hosts", "detail"):
        table.add_column(column, overflow="fold")
    for result in results:
        style = _STYLE[result.status]
        table.add_row(
            escape(result.name), f"[{style}]{result.status}[/{style}]", escape(", ".join(result.hosts)), escape(result.detail)
        )
    console.print(table)
    line, code = verdict(results, strict)
    console.print(f"[{'bold red' if code else 'green'}]{escape(line)}[/]")
    return code


def write_page(page: str, path: Path | None) -> None:
    """The report page on stdout (``None``) or written to ``path`` (atomically, never through a link)."""
    from provision.errors import ProvisionError

    try:
        write_or_print(page, path, "report")
    except ProvisionError as error:  # a link planted there since the run started
        raise fail(str(error)) from None


def print_marks(report, console) -> int:
    """What --drain did, one line per node (drains, resumes, nodes left alone, nodes not reached,
    links at fault); 1 when the Slurm host could not be read or an scontrol failed."""
    from rich.markup import escape

    from provision.plans.slurm_marks import OUTCOMES

    if report.error:
        console.print(f"[bold red]not drained: {escape(report.error)}[/]")
        return 1
    for host, mark in report.marks.items():
        if mark.outcome == "up":
            continue
        said = f"{host}: {OUTCOMES[mark.outcome]}" + (f" ({mark.detail})" if mark.detail else "")
        console.print(escape(f"slurm: {said}"), highlight=False)
    for host, why in report.plan.not_reached.items():
        console.print(escape(f"slurm: {host}: not reached, not drained ({why})"), highlight=False)
    for link in report.plan.links:
        console.print(
            escape(f"slurm: link {link.a}-{link.b}: {link.verdict}, neither node drained ({link.why})"), highlight=False
        )
    return 0 if report.ok else 1
