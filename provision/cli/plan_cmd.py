"""`provision rankfile`, `launch`, `topology`, `slurm-nodes`: plans from facts."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer

from provision.cli import command_table, options as opt
from provision.cli.output import error, fail, note, stderr, warn, write_or_print, wrote

commands = command_table()

Dims = Annotated[str, typer.Argument(help="XxYxZ.")]
Hosts = Annotated[str, typer.Option("--hosts", help="h1,h2,...: Y·Z hosts, rack by rack (default: the inventory's racks).")]
Probe = Annotated[
    bool, typer.Option("--probe", help="Probe the hosts now (then save their facts) instead of reading --facts-dir.")
]
AllowNoGpu = Annotated[bool, typer.Option("--allow-no-gpu", help="Allow more learners than GPUs (CPU-only test runs).")]
NoAffinity = Annotated[bool, typer.Option("--no-gpu-affinity", help="Ignore GPU→socket affinity; use rank_gen's even spread.")]
HostsArgument = Annotated[
    list[str],
    typer.Argument(help="Hosts or groups (default: every host of the inventory; without one, every host in --facts-dir)."),
]


def make_plan(ctx: typer.Context, dims_text: str, hosts: str | None, probe: bool, allow_no_gpu: bool, no_affinity: bool):
    """The inventory and the rank plan (:func:`provision.plans.service.rank_plan`, probing now with
    the command's settings under ``probe``); the plan's warnings on stderr.

    Hosts that could not be probed: one line each, exit 1 (the others' facts are saved).
    """
    from provision.plans.service import PlanRequest, rank_plan
    from provision.probe.cached import ProbeFailed, ProbeSettings

    settings = opt.settings(ctx)
    prober = ProbeSettings(settings.ssh, settings.forks, settings.workers) if probe else None
    request = PlanRequest(dims_text, hosts, settings.inventory, settings.facts_dir, prober, allow_no_gpu, not no_affinity)
    try:
        inv, plan = rank_plan(request)
    except ProbeFailed as problem:
        raise fail(str(problem), code=1) from None
    for warning in plan.warnings:
        warn(str(warning))
    return inv, plan


def now() -> str:
    """The time a generated file is stamped with."""
    return dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")


@commands.command(
    epilog="Examples:\n\n  provision rankfile 4x2x3 --hosts sys-89074,sys-89075,sys-89076,sys-89077,sys-89078,sys-89079 -o 4x2x3.rf\n\n"  # noqa: E501 - one literal, kept whole to be read or grepped
    "  provision rankfile --check 2x10core.rf      # which lines name cores that do not exist"
)
def rankfile(
    ctx: typer.Context,
    dims: Annotated[str, typer.Argument(help="XxYxZ: X GPUs (learners) per host, Y hosts per rack, Z racks.")] = None,
    *,
    hosts: Hosts = None,
    inventory: opt.Inventory,
    facts_dir: opt.FactsDir,
    output: Annotated[Path, typer.Option("-o", "--output", help="Write here (atomically; an old file is kept as FILE~).")] = None,
    check: Annotated[Path, typer.Option("--check", help="Validate an existing rank file against the facts instead.")] = None,
    probe: Probe = False,
    allow_no_gpu: AllowNoGpu = False,
    no_gpu_affinity: NoAffinity = False,
    forks: opt.Forks,
    connect_timeout: opt.ConnectTimeout,
    command_timeout: opt.CommandTimeout,
    accept_new_host_keys: opt.AcceptNew,
    known_hosts: opt.KnownHosts,
    ssh_config: opt.SshConfig,
) -> None:
    """Write an MPI rank file (rank_gen numbering) with slots from each host's probed cores."""
    if check is not None:
        from provision.plans.rankcheck import check_rankfile_file

        problems, ranks, unreadable = check_rankfile_file(check, facts_dir, inventory)
        for problem in unreadable:
            warn(problem)
        for problem in problems:
            typer.echo(problem)
        if problems:
            raise typer.Exit(1)
        typer.echo(f"{check}: {ranks} ranks, every host, socket and core exists")
        return
    if dims is None:
        raise fail("give dims XxYxZ (or --check FILE)")
    from provision.plans.rankfile import render_rankfile

    _, plan = make_plan(ctx, dims, hosts, probe, allow_no_gpu, no_gpu_affinity)
    write_or_print(render_rankfile(plan, now()), output, "rank file")


@commands.command(
    epilog="Examples:\n\n  provision launch 4x2x1 --ddl-mode n --dev-sync 1 -- caffe train -solver s.prototxt -gpu 0 -bvlc\n\n"
    "  provision launch 4x2x1 --format horovod -- python train.py\n\n  provision launch 2x2x1 --allow-no-gpu --run -- hostname"
)
def launch(
    ctx: typer.Context,
    dims: Dims,
    command: Annotated[list[str], typer.Argument(help="The program and its arguments, after --.")] = None,
    *,
    hosts: Hosts = None,
    inventory: opt.Inventory,
    facts_dir: opt.FactsDir,
    rankfile_out: Annotated[
        Path,
        typer.Option(
            "--rankfile",
            help="Where to write the rank file (default: ./XxYxZ.rf; OpenMPI 5's hostfile goes beside it as .hosts).",
        ),
    ] = None,
    export: Annotated[
        list[str],
        typer.Option(
            "-x", "--export", help="Also pass this environment variable (-x NAME or -x NAME=VALUE; checked against NCCL's rules)."
        ),
    ] = [],  # noqa: B006 - typer copies it
    common_rails: Annotated[
        bool,
        typer.Option(
            "--common-rails",
            help="Use only the RDMA rails in places every host has, with one link layer "
            "(else hosts whose rails cannot connect are refused).",
        ),
    ] = False,
    own_gpu_only: Annotated[
        bool,
        typer.Option(
            "--own-gpu-only",
            help="Each rank sees only its own GPU, as device 0 (for programs written for one GPU), not its host's "
            "GPUs in local-rank order.",
        ),
    ] = False,
    iface: Annotated[str, typer.Option("--iface", help="btl_tcp_if_include interface (default: one up on every host).")] = None,
    ddl_mode: Annotated[str, typer.Option("--ddl-mode", help="DDL -mode letter: b, n, r, m, c or p.")] = None,
    dev_sync: Annotated[int, typer.Option("--dev-sync", help="DDL -dev_sync 0|1|2.")] = None,
    dump_iter: Annotated[int, typer.Option("--dump-iter", help="DDL -dump_iter N.")] = None,
    report_bindings: Annotated[
        bool, typer.Option("--report-bindings", help="Add mpirun --report-bindings (with --run: check them against the plan).")
    ] = False,
    allow_run_as_root: Annotated[
        bool, typer.Option("--allow-run-as-root", help="Pass mpirun's own --allow-run-as-root (OpenMPI refuses root without it).")
    ] = False,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="Print another launcher's command instead, with the same settings in its own form: horovod "
            "(horovodrun), deepspeed (DeepSpeed's openmpi launcher), torchrun (one command per host); a Slurm batch "
            "script (sbatch); or the host list alone (hostfile).",
        ),
    ] = None,
    run: Annotated[
        bool,
        typer.Option(
            "--run", help="Run it from the first host over SSH in a terminal (Ctrl-C stops mpirun), streaming its output."
        ),
    ] = False,
    no_doctor: Annotated[
        bool,
        typer.Option("--no-doctor", help="With --run: skip doctor's fast checks (reach, pairwise SSH, software, limits) first."),
    ] = False,
    pick_healthy: Annotated[
        bool,
        typer.Option(
            "--pick-healthy",
            help="Fill Y·Z from the candidates that pass doctor's fast checks, rack by rack; name those left out.",
        ),
    ] = False,
    perf: Annotated[bool, typer.Option("--perf", help="With --pick-healthy: also leave out what doctor --perf finds.")] = False,
    budget: Annotated[str, typer.Option("--budget", help="With --perf: doctor --perf's time budget (60s, 5m).")] = None,
    probe: Probe = False,
    allow_no_gpu: AllowNoGpu = False,
    no_gpu_affinity: NoAffinity = False,
    forks: opt.Forks,
    connect_timeout: opt.ConnectTimeout,
    command_timeout: opt.CommandTimeout,
    accept_new_host_keys: opt.AcceptNew,
    known_hosts: opt.KnownHosts,
    ssh_config: opt.SshConfig,
) -> None:
    """Print (or --run) the mpirun command for a rank file made from the facts."""
    from provision.launch.export_lint import export_warnings
    from provision.launch.job import LaunchOptions, launch_output
    from provision.plans.nics import plan_nics

    if pick_healthy or perf:
        from provision.cli.healthy_cmd import healthy_hosts

        hosts = healthy_hosts(dims, hosts, opt.settings(ctx), perf, budget)
    inv, plan = make_plan(ctx, dims, hosts, probe, allow_no_gpu, no_gpu_affinity)
    options = LaunchOptions(
        list(command or []), export, iface, ddl_mode, dev_sync, dump_iter, report_bindings, allow_run_as_root, rankfile_out,
        own_gpu_only,
    )  # fmt: skip
    nic_plan = plan_nics(plan, iface, common_rails=common_rails)  # a PlanError (no common interface, rails differ) exits 2
    for line in nic_plan.notes:
        note(line)
    for line in export_warnings(plan, nic_plan, export, own_gpu_only=own_gpu_only):
        warn(line)
    if run and fmt is not None:
        raise fail(f"--run starts mpirun itself; with --format {fmt}, run the printed command (on the first host)")
    output, job = launch_output(plan, nic_plan, options, fmt, now())  # refuses bad options before anything is written
    _write(output.files)
    for line in output.notes:
        stderr().print(f"provision: {line}", highlight=False, soft_wrap=True, markup=False)
    if job is None:  # --format: the command (or batch script) to run where the user chooses
        typer.echo(output.command, nl=False)
        return
    settings = opt.settings(ctx)
    first = inv.resolve([plan.hosts[0].host])[0]
    if not run:
        from provision.launch.mpirun import root_message
        from provision.launch.runner import login_user

        if login_user(first, settings.ssh) == "root" and not allow_run_as_root:
            warn(root_message(first.name, "root"))
        typer.echo(output.command, nl=False)
        return
    if not no_doctor:
        _doctor_gate(inv.resolve([host.host for host in plan.hosts]), settings)
    from provision.launch.runner import run_from_first_host

    raise typer.Exit(
        run_from_first_host(
            first, settings.ssh, plan, job.remote, job.argv, allow_run_as_root=allow_run_as_root, check=report_bindings
        )
    )


def _write(files) -> None:
    """Write each launch file atomically and say so (an old file is kept as FILE~)."""
    from provision.files import write_atomic

    for file in files:
        wrote(file.what, Path(file.path), write_atomic(Path(file.path), file.text))


def _doctor_gate(hosts, settings) -> None:
    """doctor's fast checks before a launch: a failed check stops it (its table on stderr, exit 1);
    nodes that cannot all SSH to each other are a warning (mpirun then starts every daemon itself)."""
    from provision.cli.doctor_view import print_checks
    from provision.doctor.runner import fast_checks

    results = fast_checks(hosts, settings.ssh, settings.forks)
    if any(result.status == "fail" for result in results):
        print_checks(results, stderr())
        stderr().print("provision: not launched: a doctor check failed (--no-doctor to launch anyway)", markup=False)
        raise typer.Exit(1)
    for result in results:
        if result.name == "pairwise ssh" and result.status == "warn":  # the nodes cannot all reach each other
            warn(f"{result.name}: {result.detail}")


@commands.command(
    epilog="Examples:\n\n  provision topology 4x2x1 --hosts sys-89074,sys-89075\n\n  provision topology 4x2x3 --svg layout.svg"
)
def topology(
    ctx: typer.Context,
    dims: Dims,
    *,
    hosts: Hosts = None,
    inventory: opt.Inventory,
    facts_dir: opt.FactsDir,
    svg_out: Annotated[Path, typer.Option("--svg", help="Also write an SVG picture here.")] = None,
    probe: Probe = False,
    allow_no_gpu: AllowNoGpu = False,
    no_gpu_affinity: NoAffinity = False,
    forks: opt.Forks,
    connect_timeout: opt.ConnectTimeout,
    command_timeout: opt.CommandTimeout,
    accept_new_host_keys: opt.AcceptNew,
    known_hosts: opt.KnownHosts,
    ssh_config: opt.SshConfig,
) -> None:
    """Show which rank is bound to which cores, and which GPU it drives: racks → hosts → sockets."""
    from provision.cli.output import stdout
    from provision.errors import PlanError
    from provision.plans.nics import plan_nics
    from provision.plans.picture import rich_tree, svg

    _, plan = make_plan(ctx, dims, hosts, probe, allow_no_gpu, no_gpu_affinity)
    try:
        nic_plan = plan_nics(plan)
    except PlanError as problem:  # no common interface: the NICs are still worth drawing
        note(str(problem))
        nic_plan = plan_nics(plan, iface="", common_rails=True)
    for line in nic_plan.notes:
        note(line)
    stdout().print(rich_tree(plan, nic_plan))
    if svg_out is not None:
        write_or_print(svg(plan), svg_out, "picture")


def fact_host_names(hosts: list[str] | None, inventory: Path | None, facts_dir: Path) -> list[str]:
    """The hosts a facts-only command covers: those named, else every host of the inventory, else
    (no inventory) every host with facts in ``facts_dir``; never an empty list."""
    from provision.cli.targets import resolve_targets
    from provision.probe.store import cached_hosts

    inv, targets = resolve_targets(inventory, hosts or [])
    names = [host.name for host in targets] if (hosts or inv.path is not None) else cached_hosts(facts_dir)
    if not names:
        raise fail(f"no hosts: name some, give an inventory (-i), or probe hosts into {facts_dir}/ first")
    return names


def facts_of(patterns: list[str] | None, inventory: Path | None, facts_dir: Path) -> tuple[list, list[str]]:
    """Facts of the named hosts and groups (none named: as :func:`fact_host_names`), and one error
    line per host without."""
    from provision.errors import FactsError
    from provision.probe.store import load_host

    found, errors = [], []
    for name in fact_host_names(patterns, inventory, facts_dir):
        try:
            found.append(load_host(facts_dir, name, inventory))
        except FactsError as problem:
            errors.append(str(problem))
    return found, errors


@commands.command(
    "slurm-nodes",
    epilog="Examples:\n\n  provision slurm-nodes gpu > nodes.conf && cat nodes.conf >> /etc/slurm/slurm.conf\n\n"
    "  provision slurm-nodes -i inventory/hosts.yml all",
)
def slurm_nodes(
    hosts: HostsArgument = None,
    *,
    inventory: opt.Inventory,
    facts_dir: opt.FactsDir,
) -> None:
    """slurm.conf NodeName lines from facts, in slurmd -C's format, with Gres=gpu:N.

    All or nothing: every host's facts are read first, and nothing is printed unless all of them
    are there, so a failed run appended to slurm.conf leaves no partial list behind."""
    from provision.plans.slurm import identity_problems, slurm_node_line, uneven_note

    found, problems = facts_of(hosts, inventory, facts_dir)
    problems.extend(identity_problems(found).values())  # a reserved word or another host's name
    if problems:
        for problem in problems[:-1]:
            error(problem)
        count = len(found) + len(problems)
        counted = f" ({len(problems)} of {count} hosts have no usable facts)" if count > 1 else ""
        raise fail(f"{problems[-1]}{counted}; nothing printed")
    for facts in found:
        typer.echo(slurm_node_line(facts))
        uneven = uneven_note(facts)
        if uneven:
            warn(uneven)
