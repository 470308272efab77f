"""`provision rankfile`, `launch`, `topology`: plans from facts."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer

from provision.cli import command_table, options as opt
from provision.cli.output import fail, note, stderr, warn, write_or_print, wrote

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


def plan_request(ctx: typer.Context, dims_text: str, hosts: str | None, probe: bool, allow_no_gpu: bool, no_affinity: bool):
    """What to plan (:class:`provision.plans.service.PlanRequest`), probing now with the command's
    settings under ``probe``."""
    from provision.plans.service import PlanRequest
    from provision.probe.cached import ProbeSettings

    settings = opt.settings(ctx)
    prober = ProbeSettings(settings.ssh, settings.forks, settings.workers) if probe else None
    return PlanRequest(dims_text, hosts, settings.inventory, settings.facts_dir, prober, allow_no_gpu, not no_affinity)


def now() -> str:
    """The time a generated file is stamped with."""
    return dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def failed(problem) -> typer.Exit:
    """One line for a plan that could not be made: exit 1 where hosts could not be probed (the
    others' facts are saved) or too few were healthy, else 2 (bad input)."""
    return fail(str(problem), code=getattr(problem, "code", 2))


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
    from provision.errors import ProvisionError
    from provision.plans.service import rankfile_text

    try:
        plan, text = rankfile_text(plan_request(ctx, dims, hosts, probe, allow_no_gpu, no_gpu_affinity), now())
    except ProvisionError as problem:
        raise failed(problem) from None
    for warning in plan.warnings:
        warn(str(warning))
    write_or_print(text, output, "rank file")


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
    from provision.cli.doctor_view import print_checks
    from provision.errors import ProvisionError
    from provision.launch.job import LaunchOptions
    from provision.launch.service import LaunchHooks, LaunchRequest, launch as start

    if run and fmt is not None:
        raise fail(f"--run starts mpirun itself; with --format {fmt}, run the printed command (on the first host)")
    options = LaunchOptions(
        list(command or []), export, iface, ddl_mode, dev_sync, dump_iter, report_bindings, allow_run_as_root, rankfile_out,
        own_gpu_only,
    )  # fmt: skip
    request = LaunchRequest(
        plan_request(ctx, dims, hosts, probe, allow_no_gpu, no_gpu_affinity),
        options,
        common_rails,
        fmt,
        run,
        no_doctor,
        pick_healthy,
        perf,
        budget,
        now(),
    )
    hooks = LaunchHooks(warn=warn, note=note, say=_say, wrote=wrote)
    try:
        done = start(request, opt.settings(ctx), hooks)
    except ProvisionError as problem:
        raise failed(problem) from None
    if done.checks:  # doctor's fast checks stopped a --run
        print_checks(done.checks, stderr())
        stderr().print("provision: not launched: a doctor check failed (--no-doctor to launch anyway)", markup=False)
    if done.command is not None:
        typer.echo(done.command, nl=False)
    raise typer.Exit(done.exit_code)


def _say(line: str) -> None:
    """What the launch did, one stderr line (``provision: ...``)."""
    stderr().print(f"provision: {line}", highlight=False, soft_wrap=True, markup=False)


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
    from provision.cli.plan_view import show_topology
    from provision.errors import ProvisionError
    from provision.plans.service import topology as drawn

    try:
        shown = drawn(plan_request(ctx, dims, hosts, probe, allow_no_gpu, no_gpu_affinity))
    except ProvisionError as problem:
        raise failed(problem) from None
    show_topology(shown, svg_out)
