"""`provision run`: an ad-hoc command on hosts or groups, as `ansible PATTERN -a CMD`, or a file
copied to them (pdcp); as root with --become, identical outputs folded with --fold (clush -b)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from provision.cli import command_table, options as opt
from provision.cli.output import fail

commands = command_table()


@commands.command(
    "run",
    epilog="Examples:\n\n  provision run gpu -- nvidia-smi -L\n\n  provision run w1,w2 -- grep 'a b' /etc/hosts\n\n"
    "  provision run all --shell 'df -h /data | tail -1'   # shell text, passed as written\n\n"
    "  provision run all --become --fold -- cat /etc/security/limits.d/99-memlock.conf   # as root, identical outputs folded\n\n"
    "  provision run 'gpu:!w3' --copy ./nccl.conf --dest /etc/nccl.conf --become   # as pdcp / clush --copy",
)
def run(
    ctx: typer.Context,
    hosts: Annotated[
        str, typer.Argument(help="Hosts, groups or patterns, comma-separated, as --limit takes them (all, gpu:!w3, w[1:3], w*).")
    ],
    command: Annotated[
        list[str], typer.Argument(help="The program and its arguments, after --: each word passed as typed.")
    ] = None,
    *,
    shell: Annotated[
        str, typer.Option("--shell", help="Run this shell text instead (pipes, globs: you write the quoting).")
    ] = None,
    become: Annotated[
        bool, typer.Option("--become", "-b", help="As root, through sudo (sudo -n, or the password from -K).")
    ] = False,
    ask_become_pass: Annotated[
        bool,
        typer.Option("--ask-become-pass", "-K", help="Ask once for the sudo password (sent on stdin, never on a command line)."),
    ] = False,
    folded: Annotated[
        bool,
        typer.Option(
            "--fold", "-B", help="Hosts with the same exit status and output share one block under their host list (clush -b)."
        ),
    ] = False,
    copy: Annotated[
        Path, typer.Option("--copy", metavar="FILE", help="Copy this local file to every host instead (pdcp).")
    ] = None,
    dest: Annotated[
        str,
        typer.Option(
            "--dest", metavar="PATH", help="Where --copy writes it: a file path, or a folder ending in / (keeps the name)."
        ),
    ] = None,
    inventory: opt.Inventory,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead.")] = False,
    forks: opt.RunForks,
    connect_timeout: opt.ConnectTimeout,
    command_timeout: opt.CommandTimeout,
    accept_new_host_keys: opt.AcceptNew,
    known_hosts: opt.KnownHosts,
    ssh_config: opt.SshConfig,
) -> None:
    """Run one command on hosts or groups (or copy a file to them): each host's output under its
    name, exit 1 if any failed."""
    import getpass

    from provision.cli.targets import resolve_targets
    from provision.errors import ProvisionError
    from provision.transport.adhoc import command_text

    try:
        text = None if copy is not None and not command and shell is None else command_text(command, shell)
    except ValueError as error:
        raise fail(str(error)) from None
    names = [name.strip() for name in hosts.split(",") if name.strip()]
    _, targets = resolve_targets(inventory, names)
    if not targets:
        raise fail("no hosts: name some, or give an inventory with -i")
    if copy is not None and text is not None:
        raise fail("give a command or --copy FILE, not both")
    password = getpass.getpass("BECOME password: ") if ask_become_pass else None
    settings = opt.settings(ctx)
    from provision.engine.adhoc import AdhocJob, report_lines, run_job  # the engine: once the hosts are known

    job = AdhocJob(text, copy, dest, become or ask_become_pass, password)
    try:
        results = run_job(targets, job, settings.ssh, settings.forks)
    except ProvisionError as error:
        raise fail(str(error)) from None
    if as_json:
        typer.echo(
            json.dumps({"command": text, "copy": str(copy) if copy else None, "hosts": [r.__dict__ for r in results]}, indent=2)
        )
    else:
        for to_stderr, line in report_lines(results, folded):
            typer.echo(line, err=to_stderr)
    failed = [result.host for result in results if not result.ok]
    if failed:
        if not as_json:
            typer.echo(f"provision: {len(failed)} of {len(results)} hosts failed: {', '.join(failed)}", err=True)
        raise typer.Exit(1)
