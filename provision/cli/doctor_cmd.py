"""`provision doctor`: is this cluster ready for a multi-node job? (checks across nodes)."""

from __future__ import annotations

import json
from pathlib import Path
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
    "  provision doctor all --perf --budget 60s\n\n"
    "  provision doctor all --perf --report ready.html         # the page: heat maps, checks, layouts\n\n"
    "  provision doctor --report ready.html --from-json run.json   # the same page from a saved --json\n\n"
    "  provision doctor gpu --perf --drain --slurm-host ctl      # drain in Slurm what fails, resume what was fixed\n\n"
    "  provision doctor gpu --node-script provision-node-check   # for Slurm's HealthCheckProgram and Prolog"
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
        bool,
        typer.Option(
            "--json",
            help="Print the verdict as JSON (schema provision.doctor, version 1: every check with its bad nodes, "
            "bad links, thresholds and coverage; the bandwidth matrices; what --drain did) instead of a table.",
        ),
    ] = False,
    report_page: Annotated[
        Path,
        typer.Option(
            "--report",
            help="Also write the readiness report to FILE ('-': stdout): one self-contained web page with the verdict, "
            "each check and what to do, --perf's pairwise heat maps (bad nodes and links marked) and each node layout.",
        ),
    ] = None,
    from_json: Annotated[
        Path,
        typer.Option(
            "--from-json",
            help="With --report: draw the page from this saved doctor --json output instead of running the checks (no SSH).",
        ),
    ] = None,
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
    drain: Annotated[
        bool,
        typer.Option(
            "--drain",
            help="Drain in Slurm each node a check fails on, with the reason 'provision: CHECK: what'; resume the nodes "
            "provision drained whose check now passes; never touch a node drained for another reason (LBNL NHC's rule).",
        ),
    ] = False,
    slurm_host: Annotated[
        str,
        typer.Option(
            "--slurm-host",
            help="With --drain: the inventory host where scontrol runs (default: the inventory's slurm.controller).",
        ),
    ] = None,
    node_script: Annotated[
        Path,
        typer.Option(
            "--node-script",
            help="Write the node check for these hosts to FILE ('-': stdout) from their facts (no SSH), for Slurm's "
            "HealthCheckProgram and Prolog, and stop.",
        ),
    ] = None,
    facts_dir: opt.FactsDir,
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
    from provision.cli.output import stdout, write_or_print
    from provision.doctor.perf import perf_settings
    from provision.doctor.runner import doctor as run_doctor
    from provision.doctor.service import doctor_request, node_check_script, report_target, slurm_host as find_slurm_host
    from provision.errors import ProvisionError

    page_out = None if report_page is None or str(report_page) == "-" else report_page
    if as_json and report_page is not None and page_out is None:
        raise fail("--report - and --json both write to stdout: give --report a file")
    if from_json is not None:
        if report_page is None:
            raise fail("--from-json draws a saved run's page: add --report FILE")
        if drain or perf or as_json or node_script is not None:
            raise fail("--from-json draws a saved run and stops: leave out --perf, --drain, --json and --node-script")
        from provision.doctor.service import saved_page

        try:
            page = saved_page(from_json)
        except ProvisionError as error:
            raise fail(str(error)) from None
        _write_page(page, page_out)
        return
    if node_script is not None:
        if drain or perf or as_json or report_page is not None:
            raise fail(
                "--node-script writes the node check from the facts and stops: leave out --drain, --perf, --json and --report"
            )
        try:
            script = node_check_script(inventory, hosts or [], facts_dir)
        except ProvisionError as error:
            raise fail(str(error)) from None
        write_or_print(script, None if str(node_script) == "-" else node_script, "node check")
        return
    if slurm_host is not None and not drain:
        raise fail("--slurm-host says where --drain runs scontrol: add --drain")
    try:
        drain_on = find_slurm_host(inventory, slurm_host) if drain else None
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
        if page_out is not None:
            report_target(page_out)
    except ProvisionError as error:
        raise fail(str(error)) from None
    if not targets:
        raise fail("no hosts: name some or give an inventory with -i")
    run = run_doctor(targets, settings)
    report = None
    if drain_on is not None:
        from provision.doctor.drain import apply_marks, drain_plan

        try:
            report = apply_marks(drain_plan(run), drain_on, settings.ssh)
        except ProvisionError as error:
            raise fail(str(error)) from None
    if timings:
        typer.echo(json.dumps({"doctor_timings": run.timings()}), err=True)
    shown = None
    if as_json or report_page is not None:
        from provision.doctor.service import run_document

        shown = run_document(run, targets, inventory, strict=strict, drain=report)
    if as_json:
        typer.echo(json.dumps(shown, indent=2))
        code = shown["verdict"]["exit_code"]
    elif page_out is None and report_page is not None:
        code = shown["verdict"]["exit_code"]  # --report -: the page is stdout
    else:
        code = print_checks(run.results, stdout(), strict)
        if report is not None:
            code = print_marks(report, stdout()) or code
    if report_page is not None:
        from provision.doctor.page import report_page as page_of

        _write_page(page_of(shown), page_out)
    raise typer.Exit(code)


def _write_page(page: str, path: Path | None) -> None:
    """The report page on stdout (``None``) or written to ``path`` (atomically, never through a link)."""
    from provision.cli.output import write_or_print
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
