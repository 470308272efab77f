"""`provision run`: an ad-hoc command on hosts or groups, as `ansible PATTERN -a CMD`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from provision.cli import app, fail, options as opt
from provision.cli.targets import resolve_targets
from provision.text import shown
from provision.transport.adhoc import command_text, run_adhoc


@app.command(
    "run",
    epilog="Examples:\n\n  provision run gpu -- nvidia-smi -L\n\n  provision run w1,w2 -- grep 'a b' /etc/hosts\n\n"
    "  provision run all --shell 'df -h /data | tail -1'   # shell text, passed as written",
)
def run(
    hosts: str = typer.Argument(..., help="Hosts or groups, comma-separated (all: every host of the inventory)."),
    command: list[str] = typer.Argument(None, help="The program and its arguments, after --: each word passed as typed."),
    shell: str = typer.Option(None, "--shell", help="Run this shell text instead (pipes, globs: you write the quoting)."),
    inventory: Path = opt.INVENTORY,
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts instead."),
    forks: int = opt.FORKS,
    connect_timeout: float = opt.CONNECT_TIMEOUT,
    command_timeout: float = opt.COMMAND_TIMEOUT,
    accept_new_host_keys: bool = opt.ACCEPT_NEW,
    known_hosts: Path = opt.KNOWN_HOSTS,
    ssh_config: Path = opt.SSH_CONFIG,
) -> None:
    """Run one command on hosts or groups: each host's output under its name, exit 1 if any failed."""
    try:
        text = command_text(command, shell)
    except ValueError as error:
        raise fail(str(error)) from None
    names = [name.strip() for name in hosts.split(",") if name.strip()]
    _, targets = resolve_targets(inventory, names)
    if not targets:
        raise fail("no hosts: name some, or give an inventory with -i")
    settings = opt.probe_settings(forks, connect_timeout, command_timeout, accept_new_host_keys, known_hosts, ssh_config)
    results = run_adhoc(targets, text, settings.ssh, settings.forks)
    if as_json:
        typer.echo(json.dumps({"command": text, "hosts": [result.__dict__ for result in results]}, indent=2))
    else:
        for result in results:
            if result.error_kind is not None:
                typer.echo(shown(f"{result.host} | {result.error_kind}: {result.error}", newlines=False), err=True)
                continue
            typer.echo(f"{result.host} | rc={result.exit_code}")
            if result.stdout:
                typer.echo(result.stdout, nl=not result.stdout.endswith("\n"))
            # Each stderr line names its host, as pdsh and clush do: stderr is read apart from stdout
            # (redirected, piped), where the `host | rc=N` line above it is not.
            for line in result.stderr.splitlines():
                typer.echo(f"{result.host}: {line}", err=True)
    failed = [result.host for result in results if not result.ok]
    if failed:
        if not as_json:
            typer.echo(f"provision: {len(failed)} of {len(results)} hosts failed: {', '.join(failed)}", err=True)
        raise typer.Exit(1)
