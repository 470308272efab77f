"""`provision run`: an ad-hoc command on hosts or groups, as `ansible PATTERN -a CMD`."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import typer

from provision.cli import app, fail, options as opt
from provision.cli.targets import resolve_targets
from provision.engine.adhoc import AdhocJob, report_lines, run_job
from provision.errors import ProvisionError
from provision.transport.adhoc import command_text


@app.command(
    "run",
    epilog="Examples:\n\n  provision run gpu -- nvidia-smi -L\n\n  provision run w1,w2 -- grep 'a b' /etc/hosts\n\n"
    "  provision run all --shell 'df -h /data | tail -1'   # shell text, passed as written\n\n"
    "  provision run all --become --fold -- cat /etc/security/limits.d/99-memlock.conf   # as root, identical outputs folded\n\n"
    "  provision run 'gpu:!w3' --copy ./nccl.conf --dest /etc/nccl.conf --become   # as pdcp / clush --copy",
)
def run(
    hosts: str = typer.Argument(
        ..., help="Hosts, groups or patterns, comma-separated, as --limit takes them (all, gpu:!w3, w[1:3], w*)."
    ),
    command: list[str] = typer.Argument(None, help="The program and its arguments, after --: each word passed as typed."),
    shell: str = typer.Option(None, "--shell", help="Run this shell text instead (pipes, globs: you write the quoting)."),
    become: bool = typer.Option(False, "--become", "-b", help="As root, through sudo (sudo -n, or the password from -K)."),
    ask_become_pass: bool = typer.Option(
        False, "--ask-become-pass", "-K", help="Ask once for the sudo password (sent on stdin, never on a command line)."
    ),
    folded: bool = typer.Option(
        False, "--fold", "-B", help="Hosts with the same exit status and output share one block under their host list (clush -b)."
    ),
    copy: Path = typer.Option(None, "--copy", metavar="FILE", help="Copy this local file to every host instead (pdcp)."),
    dest: str = typer.Option(
        None, "--dest", metavar="PATH", help="Where --copy writes it: a file path, or a folder ending in / (keeps the name)."
    ),
    inventory: Path = opt.INVENTORY,
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts instead."),
    forks: int = opt.RUN_FORKS,
    connect_timeout: float = opt.CONNECT_TIMEOUT,
    command_timeout: float = opt.COMMAND_TIMEOUT,
    accept_new_host_keys: bool = opt.ACCEPT_NEW,
    known_hosts: Path = opt.KNOWN_HOSTS,
    ssh_config: Path = opt.SSH_CONFIG,
) -> None:
    """Run one command on hosts or groups (or copy a file to them): each host's output under its
    name, exit 1 if any failed."""
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
    settings = opt.probe_settings(forks, connect_timeout, command_timeout, accept_new_host_keys, known_hosts, ssh_config)
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
