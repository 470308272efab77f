"""`provision run`: an ad-hoc command on hosts or groups, as `ansible PATTERN -a CMD`."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from provision.cli import command_table, options as opt
from provision.cli.output import fail

commands = command_table()


@commands.command(
    "run",
    epilog="Examples:\n\n  provision run gpu -- nvidia-smi -L\n\n  provision run w1,w2 -- grep 'a b' /etc/hosts\n\n"
    "  provision run all --shell 'df -h /data | tail -1'   # shell text, passed as written",
)
def run(
    ctx: typer.Context,
    hosts: Annotated[str, typer.Argument(help="Hosts or groups, comma-separated (all: every host of the inventory).")],
    command: Annotated[
        list[str], typer.Argument(help="The program and its arguments, after --: each word passed as typed.")
    ] = None,
    *,
    shell: Annotated[
        str, typer.Option("--shell", help="Run this shell text instead (pipes, globs: you write the quoting).")
    ] = None,
    inventory: opt.Inventory,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead.")] = False,
    forks: opt.Forks,
    connect_timeout: opt.ConnectTimeout,
    command_timeout: opt.CommandTimeout,
    accept_new_host_keys: opt.AcceptNew,
    known_hosts: opt.KnownHosts,
    ssh_config: opt.SshConfig,
) -> None:
    """Run one command on hosts or groups: each host's output under its name, exit 1 if any failed."""
    from provision.cli.targets import resolve_targets
    from provision.transport.adhoc import command_text, run_adhoc

    try:
        text = command_text(command, shell)
    except ValueError as error:
        raise fail(str(error)) from None
    names = [name.strip() for name in hosts.split(",") if name.strip()]
    _, targets = resolve_targets(inventory, names)
    if not targets:
        raise fail("no hosts: name some, or give an inventory with -i")
    settings = opt.settings(ctx)
    results = run_adhoc(targets, text, settings.ssh, settings.forks)
    if as_json:
        typer.echo(json.dumps({"command": text, "hosts": [result.__dict__ for result in results]}, indent=2))
    else:
        for result in results:
            if result.error_kind is not None:
                typer.echo(f"{result.host} | {result.error_kind}: {result.error}", err=True)
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
