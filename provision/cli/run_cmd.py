"""`provision run`: an ad-hoc command on hosts or groups, as `ansible PATTERN -a CMD`, or a file
copied to them (pdcp); as root with --become, identical outputs folded with --fold (clush -b)."""

from __future__ import annotations

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

    from provision.cli.run_view import show
    from provision.engine.adhoc import AdhocRequest, run_request
    from provision.errors import ProvisionError

    settings = opt.settings(ctx)
    request = AdhocRequest(hosts, settings.inventory, tuple(command or ()), shell, copy, dest, become)
    ask = (lambda: getpass.getpass("BECOME password: ")) if ask_become_pass else None
    try:
        done = run_request(request, settings.ssh, settings.forks, ask)
    except ProvisionError as error:
        raise fail(str(error)) from None
    if not show(done, folded, as_json):
        raise typer.Exit(1)
