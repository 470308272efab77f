"""`provision probe` and `provision capture-script`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from provision.cli import command_table, options as opt
from provision.cli.output import fail
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
    from provision.cli.probe_view import Progress, show
    from provision.errors import ProvisionError
    from provision.probe.service import ProbeRequest, collect

    settings = opt.settings(ctx)
    request = ProbeRequest(
        facts_dir, hosts or [], settings.inventory, forks=settings.forks, workers=settings.workers, save=save, ssh=settings.ssh
    )
    if replay_dir is not None:
        request.replay_dir = replay_dir
        if not opt.facts_dir_named(ctx):  # DIR.facts beside the captures, never the live facts of real hosts
            request.facts_dir = None
    elif via == "slurm":
        if hosts:
            raise fail("--via slurm probes the nodes Slurm allocates: name them with --nodelist, not as arguments")
        from provision.probe.slurm import SlurmRequest

        request.slurm, request.via_host = SlurmRequest(partition, nodelist, nodes, alloc_wait), via_host
    elif via != "ssh":
        raise fail(f"--via {shown_value(via)}: ssh or slurm")
    elif partition or nodelist or nodes:
        raise fail("--partition, --nodelist and --nodes choose Slurm nodes: add --via slurm")
    progress = Progress(shown=not as_json and sys.stderr.isatty())  # rich's bar only on a terminal
    try:
        with progress:
            run = collect(request, on_start=progress.start, on_done=progress.advance)
    except ProvisionError as problem:  # bad input; a missing capture folder; a Slurm allocation that failed (its own code)
        raise fail(str(problem), code=getattr(problem, "code", 2)) from None
    show(run, save, as_json=as_json, table=table, quiet=quiet, topology=topology)
    if not run.ok:
        raise typer.Exit(1)


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
