"""`provision probe` and `provision capture-script`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from provision.cli import SafeConsole, app, config, fail, options as opt, stderr
from provision.cli.targets import resolve_targets
from provision.errors import ProvisionError
from provision.probe.gather import capture_script
from provision.probe.report import failure_lines, print_table, print_topology, results_json
from provision.probe.run import probe_hosts, replay
from provision.probe.slurm import SlurmProbeError, SlurmRequest, probe_via_slurm
from provision.probe.store import save_hosts


@app.command(
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
    hosts: list[str] = typer.Argument(None, help="Hosts or groups (default: all in the inventory)."),
    inventory: Path = opt.INVENTORY,
    facts_dir: Path = opt.FACTS_DIR,
    replay_dir: Path = typer.Option(
        None,
        "--replay",
        help="Derive facts from saved captures DIR/<host>/<name>.txt; no SSH. They are saved in DIR.facts/ "
        "unless --facts-dir (or PROVISION_FACTS_DIR, a config file) names a folder.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts instead of a table."),
    forks: int = opt.FORKS,
    workers: int = opt.WORKERS,
    connect_timeout: float = opt.CONNECT_TIMEOUT,
    command_timeout: float = opt.COMMAND_TIMEOUT,
    accept_new_host_keys: bool = opt.ACCEPT_NEW,
    known_hosts: Path = opt.KNOWN_HOSTS,
    ssh_config: Path = opt.SSH_CONFIG,
    topology: bool = typer.Option(False, "--topology", help="Also print each host's rank-file view (always for one host)."),
    save: bool = typer.Option(True, "--save/--no-save", help="Write facts and raw captures to --facts-dir."),
    via: str = typer.Option("ssh", "--via", help="ssh: each host over SSH; slurm: one srun task per node of an allocation."),
    partition: str = typer.Option(None, "--partition", help="--via slurm: the partition to allocate from."),
    nodelist: str = typer.Option(None, "--nodelist", help="--via slurm: these nodes (Slurm host list, node[01-04])."),
    nodes: int = typer.Option(None, "--nodes", help="--via slurm: how many nodes (default: those of --nodelist)."),
    via_host: str = typer.Option(
        "localhost", "--via-host", help="--via slurm: the submit host that runs salloc/srun (an inventory host; SSH)."
    ),
    alloc_wait: int = typer.Option(60, "--alloc-wait", help="--via slurm: seconds to wait for the allocation."),
) -> None:
    """Collect each host's real hardware over SSH (one connection, one command per host)."""
    console = SafeConsole()
    if replay_dir is not None:
        try:
            results = replay(replay_dir, hosts or None)
        except FileNotFoundError as error:
            raise fail(str(error)) from None
        if not _facts_dir_chosen(ctx):  # never over the live facts of real hosts with the same names
            facts_dir = replay_facts_dir(replay_dir)
    elif via == "slurm":
        if hosts:
            raise fail("--via slurm probes the nodes Slurm allocates: name them with --nodelist, not as arguments")
        settings = opt.probe_settings(
            forks, connect_timeout, command_timeout, accept_new_host_keys, known_hosts, ssh_config, workers
        )
        _, submits = resolve_targets(inventory, [via_host])
        if len(submits) != 1:
            raise fail(f"--via-host {via_host}: name one submit host, not {len(submits)}")
        submit = submits[0]
        try:
            results = probe_via_slurm(submit, SlurmRequest(partition, nodelist, nodes, alloc_wait), settings.ssh)
        except SlurmProbeError as error:
            raise fail(str(error), code=error.code) from None
    elif via != "ssh":
        raise fail(f"--via {via!r}: ssh or slurm")
    elif partition or nodelist or nodes:
        raise fail("--partition, --nodelist and --nodes choose Slurm nodes: add --via slurm")
    else:
        _, targets = resolve_targets(inventory, hosts or [])
        if not targets:
            raise fail("no hosts: name some (provision probe localhost) or give an inventory with -i")
        settings = opt.probe_settings(
            forks, connect_timeout, command_timeout, accept_new_host_keys, known_hosts, ssh_config, workers
        )
        show_progress = not as_json and len(targets) > 1 and stderr.is_terminal
        if show_progress:
            # Refreshed by each result, not by a thread of its own: worker processes are forked.
            with Progress(
                TextColumn("probing"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=stderr,
                transient=True,
                auto_refresh=False,
            ) as progress:
                task = progress.add_task("probe", total=len(targets))

                def advance(_result) -> None:
                    progress.advance(task)
                    progress.refresh()

                results = probe_hosts(targets, settings.ssh, settings.forks, on_done=advance, workers=settings.workers)
        else:
            results = probe_hosts(targets, settings.ssh, settings.forks, workers=settings.workers)
    unsaved = []  # one line per host whose facts could not be written (facts dir not writable, disk full)
    if save:
        probed = [(result.facts, result.captures) for result in results if result.facts is not None]
        try:
            problems = save_hosts(facts_dir, probed)
        except (OSError, ProvisionError) as error:
            why = f"{error.filename}: {error.strerror}" if isinstance(error, OSError) and error.filename else str(error)
            problems = {facts.host: why for facts, _ in probed}
        unsaved = [f"{host}: cannot save facts: {why}" for host, why in problems.items()]
    if as_json:
        typer.echo(results_json(results))
    else:
        print_table(results, console)
        if topology or len(results) == 1:
            for result in results:
                if result.facts is not None:
                    print_topology(result.facts, console)
        if save and len(unsaved) < sum(r.ok for r in results):
            console.print(escape(f"facts saved in {facts_dir}/"), soft_wrap=True, highlight=False)
    failed = [r for r in results if not r.ok]
    for line in failure_lines(results):  # once, one line per host, under the table
        stderr.print(escape(line), highlight=False, soft_wrap=True, style="red")
    for line in unsaved:
        stderr.print(f"provision: error: {line}", highlight=False, soft_wrap=True, markup=False)
    if failed or unsaved:
        raise typer.Exit(1)


def _facts_dir_chosen(ctx: typer.Context) -> bool:
    """True when the command line, the environment or a config file named the facts folder."""
    source = ctx.get_parameter_source("facts_dir")
    return (source is not None and source.name != "DEFAULT") or config.is_configured("facts_dir")


def replay_facts_dir(replay_dir: Path) -> Path:
    """Where replayed facts go by default: ``DIR.facts`` beside the capture folder."""
    folder = replay_dir.resolve()
    return folder.with_name(folder.name + ".facts")


@app.command(
    "capture-script",
    epilog="Example:\n\n  provision capture-script > capture.sh; scp capture.sh node01:; ssh node01 sh capture.sh /tmp/cap\n\n"
    "  then copy /tmp/cap back and run: provision probe --replay cap",
)
def capture_script_command() -> None:
    """Print a plain sh script that writes DIR/<hostname>/<name>.txt on a node (nothing to install).

    DIR/<hostname> must not exist: the script makes it itself (mode 0700) and refuses anything
    already there, so a link another user planted is never written through."""
    typer.echo(capture_script(), nl=False)
