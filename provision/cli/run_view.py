"""How `provision run` shows its results: each host's output under its name (or hosts alike folded
under their host list, ``--fold``), or JSON; and how many hosts failed."""

from __future__ import annotations

import json

import typer

from provision.engine.adhoc import report_lines


def show(run, folded: bool, as_json: bool) -> bool:
    """Print ``run`` (a :class:`provision.engine.adhoc.AdhocRun`); True when every host succeeded."""
    results = run.results
    if as_json:
        copied = str(run.copy) if run.copy else None
        document = {"command": run.command, "copy": copied, "hosts": [result.__dict__ for result in results]}
        typer.echo(json.dumps(document, indent=2))
    else:
        for to_stderr, line in report_lines(results, folded):
            typer.echo(line, err=to_stderr)
    failed = [result.host for result in results if not result.ok]
    if failed and not as_json:
        typer.echo(f"provision: {len(failed)} of {len(results)} hosts failed: {', '.join(failed)}", err=True)
    return not failed
