"""`provision doctor`: is this cluster ready for a multi-node job? (checks across nodes)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provision.cli import SafeConsole, app, fail, options as opt
from provision.doctor.checks import verdict
from provision.doctor.model import CheckResult
from provision.doctor.mounts import inventory_exports
from provision.doctor.pairwise import PARALLEL
from provision.doctor.perf import PORT, perf_settings
from provision.doctor.runner import DoctorSettings, doctor as run_doctor
from provision.doctor.sources import anaconda_prefixes, check_dataset, check_user
from provision.errors import ProvisionError
from provision.inventory.model import open_inventory
from provision.playbook.variables import Variables

_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}


def print_checks(results: list[CheckResult], console: Console, strict: bool = False) -> int:
    """The table (check, status, hosts, detail) and the verdict line; returns the exit code."""
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


def doctor_settings(
    user: str | None,
    datasets: list[str] | None,
    deep: bool,
    fast: bool,
    ssh,
    forks: int,
    pairwise_fanout: int = PARALLEL,
    conda_prefixes: tuple[str, ...] = (),
    exports: tuple = (),
) -> DoctorSettings:
    """Check --user and --dataset once, here at the edge (ProvisionError: exit 2)."""
    return DoctorSettings(
        ssh=ssh,
        user=check_user(user) if user else "",
        datasets=tuple(check_dataset(p) for p in datasets or []),
        deep=deep,
        fast=fast,
        forks=forks,
        pairwise_fanout=pairwise_fanout,
        conda_prefixes=conda_prefixes,
        exports=exports,
    )


@app.command(
    epilog="Examples:\n\n  provision doctor -i inventory/hosts.yml all --user alice\n\n"
    "  provision doctor node01 node02 --dataset /data/imagenet --deep --json\n\n"
    "  provision doctor all --perf --budget 60s"
)
def doctor(
    hosts: list[str] = typer.Argument(None, help="Hosts or groups (default: all in the inventory)."),
    inventory: Path = opt.INVENTORY,
    user: str = typer.Option(None, "--user", help="The job user (default: the user doctor logs in as on each host)."),
    dataset: list[str] = typer.Option(None, "--dataset", help="A dataset folder that must be the same on every node (repeat)."),
    deep: bool = typer.Option(False, "--deep", help="Also hash the contents of a sample of each dataset's files."),
    as_json: bool = typer.Option(False, "--json", help='Print [{"name", "status", "hosts", "detail"}] instead of a table.'),
    strict: bool = typer.Option(False, "--strict", help="Warnings fail too (exit 1)."),
    timings: bool = typer.Option(
        False, "--timings", help="Also print each phase's wall time and the work it did, as one JSON line on stderr."
    ),
    perf: bool = typer.Option(
        False,
        "--perf",
        help="Also test each pair's bandwidth (iperf3, over the job's interface) in rounds; judge links against each other.",
    ),
    rounds: int = typer.Option(None, "--rounds", help="With --perf: K random matchings instead of every pair (large clusters)."),
    budget: str = typer.Option(
        None, "--budget", help="With --perf: fit the tests in this time (60s, 5m); the check says what it covered."
    ),
    perf_port: int = typer.Option(PORT, "--perf-port", help="With --perf: the TCP port iperf3's servers listen on."),
    forks: int = opt.FORKS,
    pairwise_fanout: int = typer.Option(
        PARALLEL,
        "--pairwise-fanout",
        min=1,
        max=64,
        help="ssh clients each node runs at once in the pairwise step (each peer's sshd then sees about as many).",
    ),
    connect_timeout: float = opt.CONNECT_TIMEOUT,
    command_timeout: float = opt.COMMAND_TIMEOUT,
    accept_new_host_keys: bool = opt.ACCEPT_NEW,
    known_hosts: Path = opt.KNOWN_HOSTS,
    ssh_config: Path = opt.SSH_CONFIG,
) -> None:
    """Check that the nodes are ready for one multi-node training job, comparing them with each other."""
    try:
        ssh = opt.ssh_options(
            known_hosts,
            ssh_config,
            accept_new=accept_new_host_keys,
            connect_timeout=connect_timeout,
            command_timeout=command_timeout,
        )
        inv = open_inventory(inventory)
        targets = inv.resolve(hosts or [])
        prefixes = anaconda_prefixes(Variables(inv), targets)
        exports = inventory_exports(Variables(inv), targets)
        settings = doctor_settings(user, dataset, deep, False, ssh, forks, pairwise_fanout, prefixes, exports)
        settings = replace(settings, perf=perf_settings(perf, rounds, budget, perf_port))
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
    raise typer.Exit(print_checks(results, SafeConsole(), strict))
