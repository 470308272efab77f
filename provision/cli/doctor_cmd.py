"""`provision doctor`: is this cluster ready for a multi-node job? (checks across nodes)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from provision import defaults
from provision.cli import command_table, options as opt
from provision.cli.output import fail

commands = command_table()
_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}


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


@commands.command(
    epilog="Examples:\n\n  provision doctor -i inventory/hosts.yml all --user alice\n\n"
    "  provision doctor node01 node02 --dataset /data/imagenet --deep --json\n\n"
    "  provision doctor all --perf --budget 60s"
)
def doctor(
    ctx: typer.Context,
    hosts: Annotated[list[str], typer.Argument(help="Hosts or groups (default: all in the inventory).")] = None,
    *,
    inventory: opt.Inventory,
    user: Annotated[str, typer.Option("--user", help="The job user (default: the user doctor logs in as on each host).")] = None,
    dataset: Annotated[
        list[str], typer.Option("--dataset", help="A dataset folder that must be the same on every node (repeat).")
    ] = None,
    deep: Annotated[bool, typer.Option("--deep", help="Also hash the contents of a sample of each dataset's files.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print [{"name", "status", "hosts", "detail"}] instead of a table.')
    ] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")] = False,
    timings: Annotated[
        bool,
        typer.Option("--timings", help="Also print each phase's wall time and the work it did, as one JSON line on stderr."),
    ] = False,
    perf: Annotated[
        bool,
        typer.Option(
            "--perf",
            help="Also test each pair's bandwidth (iperf3 over the job's interface; ib_write_bw per RDMA rail) in rounds; "
            "judge links against each other.",
        ),
    ] = False,
    rounds: Annotated[
        int, typer.Option("--rounds", help="With --perf: K random matchings instead of every pair (large clusters).")
    ] = None,
    budget: Annotated[
        str, typer.Option("--budget", help="With --perf: fit the tests in this time (60s, 5m); the check says what it covered.")
    ] = None,
    perf_port: Annotated[int, typer.Option("--perf-port", help="With --perf: the TCP port iperf3's servers listen on.")] = (
        defaults.PERF_PORT
    ),
    forks: opt.Forks,
    pairwise_fanout: Annotated[
        int,
        typer.Option(
            "--pairwise-fanout",
            min=1,
            max=64,
            help="ssh clients each node runs at once in the pairwise step (each peer's sshd then sees about as many).",
        ),
    ] = defaults.PAIRWISE_FANOUT,
    connect_timeout: opt.ConnectTimeout,
    command_timeout: opt.CommandTimeout,
    accept_new_host_keys: opt.AcceptNew,
    known_hosts: opt.KnownHosts,
    ssh_config: opt.SshConfig,
) -> None:
    """Check that the nodes are ready for one multi-node training job, comparing them with each other."""
    from provision.cli.output import stdout
    from provision.doctor.perf import perf_settings
    from provision.doctor.runner import doctor as run_doctor
    from provision.doctor.service import doctor_request
    from provision.doctor.verdict import verdict
    from provision.errors import ProvisionError

    try:
        targets, settings = doctor_request(
            inventory,
            hosts or [],
            opt.settings(ctx),
            user=user,
            datasets=dataset,
            deep=deep,
            pairwise_fanout=pairwise_fanout,
            perf=perf_settings(perf, rounds, budget, perf_port),
        )
    except ProvisionError as error:
        raise fail(str(error)) from None
    if not targets:
        raise fail("no hosts: name some or give an inventory with -i")
    run = run_doctor(targets, settings)
    results = run.results
    if timings:
        typer.echo(json.dumps({"doctor_timings": run.timings()}), err=True)
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in results], indent=2))
        raise typer.Exit(verdict(results, strict)[1])
    raise typer.Exit(print_checks(results, stdout(), strict))
