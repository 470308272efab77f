"""`provision probe` and `provision capture-script`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from provision.cli import command_table, options as opt
from provision.cli.output import error, fail, stderr, stdout
from provision.text import shown_value

commands = command_table()


@commands.command(
    epilog="Examples:\n\n"
    "  provision probe localhost            # this machine, no SSH\n\n"
    "  provision probe -i inventory/hosts.yml all --forks 128\n\n"
    "  provision probe node01 node02 --json\n\n"
    "  provision probe --replay ./capture   # saved outputs, no SSH\n\n"
    "  provision probe --via slurm --partition gpu --nodes 16   # one srun from this submit host\n\n"
    "  provision probe --via slurm --nodelist 'node[01-04]' --via-host login1"
)
def probe(
    ctx: typer.Context,
    hosts: Annotated[list[str], typer.Argument(help="Hosts or groups (default: all in the inventory).")] = None,
    *,
    inventory: opt.Inventory,
    facts_dir: opt.FactsDir,
    replay_dir: Annotated[
        Path,
        typer.Option(
            "--replay",
            help="Derive facts from saved captures DIR/<host>/<name>.txt; no SSH. They are saved in DIR.facts/ "
            "unless --facts-dir (or PROVISION_FACTS_DIR, a config file) names a folder.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of a table.")] = False,
    table: Annotated[
        bool, typer.Option("--table", help="The per-host table even above 32 hosts (where a summary of what differs is shown).")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Only the summary: hosts alike grouped in one line, failures by kind.")
    ] = False,
    forks: opt.Forks,
    workers: opt.Workers = 0,
    connect_timeout: opt.ConnectTimeout,
    command_timeout: opt.CommandTimeout,
    accept_new_host_keys: opt.AcceptNew,
    known_hosts: opt.KnownHosts,
    ssh_config: opt.SshConfig,
    topology: Annotated[
        bool, typer.Option("--topology", help="Also print each host's rank-file view (always for one host).")
    ] = False,
    save: Annotated[bool, typer.Option("--save/--no-save", help="Write facts and raw captures to --facts-dir.")] = True,
    via: Annotated[
        str, typer.Option("--via", help="ssh: each host over SSH; slurm: one srun task per node of an allocation.")
    ] = "ssh",
    partition: Annotated[str, typer.Option("--partition", help="--via slurm: the partition to allocate from.")] = None,
    nodelist: Annotated[str, typer.Option("--nodelist", help="--via slurm: these nodes (Slurm host list, node[01-04]).")] = None,
    nodes: Annotated[int, typer.Option("--nodes", help="--via slurm: how many nodes (default: those of --nodelist).")] = None,
    via_host: Annotated[
        str, typer.Option("--via-host", help="--via slurm: the submit host that runs salloc/srun (an inventory host; SSH).")
    ] = "localhost",
    alloc_wait: Annotated[int, typer.Option("--alloc-wait", help="--via slurm: seconds to wait for the allocation.")] = 60,
) -> None:
    """Collect each host's real hardware over SSH (one connection, one command per host)."""
    from provision.errors import ProvisionError
    from provision.probe.service import ProbeRequest, collect, replay_facts_dir

    settings = opt.settings(ctx)
    request = ProbeRequest(facts_dir, hosts or [], forks=settings.forks, workers=settings.workers, save=save)
    if replay_dir is not None:
        request.replay_dir = replay_dir
        if not opt.facts_dir_named(ctx):  # never over the live facts of real hosts with the same names
            request.facts_dir = replay_facts_dir(replay_dir)
    elif via == "slurm":
        if hosts:
            raise fail("--via slurm probes the nodes Slurm allocates: name them with --nodelist, not as arguments")
        from provision.cli.targets import resolve_targets

        _, submits = resolve_targets(inventory, [via_host])
        if len(submits) != 1:
            raise fail(f"--via-host {via_host}: name one submit host, not {len(submits)}")
        from provision.probe.slurm import SlurmRequest

        request.submit, request.slurm = submits[0], SlurmRequest(partition, nodelist, nodes, alloc_wait)
        request.ssh = settings.ssh
    elif via != "ssh":
        raise fail(f"--via {shown_value(via)}: ssh or slurm")
    elif partition or nodelist or nodes:
        raise fail("--partition, --nodelist and --nodes choose Slurm nodes: add --via slurm")
    else:
        from provision.cli.targets import resolve_targets

        _, request.targets = resolve_targets(inventory, hosts or [])
        if not request.targets:
            raise fail("no hosts: name some (provision probe localhost) or give an inventory with -i")
        request.ssh = settings.ssh
    try:
        if len(request.targets) > 1 and not as_json and sys.stderr.isatty():  # rich's bar only on a terminal
            run = _with_progress(request)
        else:
            run = collect(request)
    except ProvisionError as problem:  # a missing capture folder; a Slurm allocation that failed (its own code)
        raise fail(str(problem), code=getattr(problem, "code", 2)) from None
    _show(run, request, as_json=as_json, table=table, quiet=quiet, topology=topology)
    if not run.ok:
        raise typer.Exit(1)


def _with_progress(request):
    """Probe with a progress bar on the terminal, refreshed by each result (not by a thread of its
    own: worker processes are forked)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from provision.probe.service import collect

    columns = (TextColumn("probing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=stderr(), transient=True, auto_refresh=False) as progress:
        task = progress.add_task("probe", total=len(request.targets))

        def advance(_result) -> None:
            progress.advance(task)
            progress.refresh()

        return collect(request, on_done=advance)


def _show(run, request, *, as_json: bool, table: bool, quiet: bool, topology: bool) -> None:
    """JSON, the table or the summary on stdout; the failures once on stderr (the table: one line
    per host; the summary: one line per distinct error, hosts folded)."""
    from provision.cli.probe_view import failure_groups, summary_lines, use_summary
    from provision.probe.report import failure_lines, results_json

    results = run.results
    summary = use_summary(results, quiet, table)
    saved = request.save and len(run.unsaved) < sum(r.ok for r in results)
    if as_json:
        typer.echo(results_json(results))
    else:
        from provision.probe.report import print_table, print_topology

        if summary:
            for line in summary_lines(results):
                typer.echo(line)
        else:
            print_table(results, stdout())
        if topology or (len(results) == 1 and not summary):  # asked for, or one host's table
            for result in results:
                if result.facts is not None:
                    print_topology(result.facts, stdout())
        if saved:
            typer.echo(f"facts saved in {request.facts_dir}/")
    failures = failure_groups(results) if summary and not as_json else failure_lines(results)
    if failures:
        from rich.markup import escape

        for line in failures:
            stderr().print(escape(line), highlight=False, soft_wrap=True, style="red")
    for line in run.unsaved:
        error(line)


@commands.command(
    "capture-script",
    epilog="Example:\n\n  provision capture-script > capture.sh; scp capture.sh node01:; ssh node01 sh capture.sh /tmp/cap\n\n"
    "  then copy /tmp/cap back and run: provision probe --replay cap",
)
def capture_script_command() -> None:
    """Print a plain sh script that writes DIR/<hostname>/<name>.txt on a node (nothing to install).

    DIR/<hostname> must not exist: the script makes it itself (mode 0700) and refuses anything
    already there, so a link another user planted is never written through."""
    from provision.probe.gather import capture_script

    typer.echo(capture_script(), nl=False)
