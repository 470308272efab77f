"""`provision doctor`: is this cluster ready for a multi-node job? (checks across nodes)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from provision import defaults
from provision.cli import command_table, options as opt
from provision.cli.output import fail

commands = command_table()


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
    from provision.cli.doctor_view import show
    from provision.doctor.service import DoctorRequest, diagnose
    from provision.errors import ProvisionError

    page_out = None if report_page is None or str(report_page) == "-" else report_page
    if as_json and report_page is not None and page_out is None:
        raise fail("--report - and --json both write to stdout: give --report a file")
    if from_json is not None:
        if report_page is None:
            raise fail("--from-json draws a saved run's page: add --report FILE")
        if drain or perf or as_json or node_script is not None:
            raise fail("--from-json draws a saved run and stops: leave out --perf, --drain, --json and --node-script")
    if node_script is not None and (drain or perf or as_json or report_page is not None):
        raise fail("--node-script writes the node check from the facts and stops: leave out --drain, --perf, --json and --report")
    if slurm_host is not None and not drain:
        raise fail("--slurm-host says where --drain runs scontrol: add --drain")
    request = DoctorRequest(
        inventory,
        hosts or [],
        user,
        dataset or [],
        deep,
        pairwise_fanout,
        perf,
        rounds,
        budget,
        perf_port,
        drain,
        slurm_host,
        document=as_json,
        page=report_page is not None,
        page_file=page_out,
        strict=strict,
        node_script=node_script is not None,
        facts_dir=facts_dir,
        from_json=from_json,
    )
    try:
        outcome = diagnose(request, opt.settings(ctx))
    except ProvisionError as error:
        raise fail(str(error)) from None
    raise typer.Exit(show(outcome, as_json=as_json, strict=strict, timings=timings, page_out=page_out, script_out=node_script))
