"""`provision rankfile`, `launch`, `topology`, `slurm-nodes`: plans from facts."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer
from rich.markup import escape

from provision.cli import SafeConsole, app, fail, options as opt, stderr
from provision.cli.targets import resolve_targets
from provision.errors import FactsError, PlanError
from provision.files import write_atomic
from provision.inventory.model import check_host_name, open_inventory
from provision.launch.export_lint import export_values, export_warnings
from provision.launch.forms import launch_form, sibling
from provision.launch.mpirun import DdlOptions, allocation_hostfile, mpirun_argv, needs_hostfile, quoted, root_message
from provision.launch.sbatch import sbatch_script
from provision.launch.wrapper import wrapper_script
from provision.plans.dims import parse_dims
from provision.plans.nics import plan_nics
from provision.plans.picture import rich_tree, svg
from provision.plans.rankcheck import check_rankfile, parse_rankfile
from provision.plans.rankfile import RankPlan, plan_rankfile, render_rankfile
from provision.plans.slurm import identity_problems, slurm_node_line, uneven_note
from provision.probe.cached import ProbeFailed, ProbeSettings, plan_facts
from provision.probe.store import cached_hosts, load_host

HOSTS = typer.Option(None, "--hosts", help="h1,h2,...: Y·Z hosts, rack by rack (default: the inventory's racks).")
PROBE = typer.Option(False, "--probe", help="Probe the hosts now (then save their facts) instead of reading --facts-dir.")
ALLOW_NO_GPU = typer.Option(False, "--allow-no-gpu", help="Allow more learners than GPUs (CPU-only test runs).")
NO_AFFINITY = typer.Option(False, "--no-gpu-affinity", help="Ignore GPU→socket affinity; use rank_gen's even spread.")


def host_names(hosts: str | None, inventory: Path | None) -> list[str]:
    """Names from --hosts, else the inventory's rack order."""
    if hosts:
        names = [name.strip() for name in hosts.split(",") if name.strip()]
        for name in names:
            check_host_name(name, "--hosts")
        return names
    names = open_inventory(inventory).rack_order()
    if not names:
        raise fail("no hosts: give --hosts h1,h2,... or racks in the inventory (-i)")
    return names


def make_plan(
    dims_text: str,
    hosts: str | None,
    inventory: Path | None,
    facts_dir: Path,
    probe: ProbeSettings | None,
    allow_no_gpu: bool,
    no_affinity: bool,
) -> RankPlan:
    """Parse dims, gather facts (``probe`` set: probe now), plan, print the plan's warnings on stderr.

    Hosts that could not be probed: one line each, exit 1 (the others' facts are saved).
    """
    dims = parse_dims(dims_text)
    names = host_names(hosts, inventory)
    try:
        facts = plan_facts(names, inventory, facts_dir, probe)
    except ProbeFailed as error:
        raise fail(str(error), code=1) from None
    plan = plan_rankfile(
        dims, facts, allow_no_gpu=allow_no_gpu, use_gpu_affinity=not no_affinity, racks=open_inventory(inventory).racks
    )
    for warning in plan.warnings:
        stderr.print(f"[yellow]warning[/yellow]: {escape(str(warning))}", highlight=False, soft_wrap=True)
    return plan


def _now() -> str:
    return dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def _say_written(what: str, path: Path, backup: Path | None) -> None:
    """One stderr line: what was written where (absolute), and where a file it replaced was kept."""
    stderr.print(
        f"wrote {what} {path.resolve()}" + (f" (the file that was there is kept as {backup.resolve()})" if backup else ""),
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


def _write_or_print(text: str, output: Path | None) -> None:
    if output is None:
        typer.echo(text, nl=False)
        return
    backup = write_atomic(output, text)
    stderr.print(f"wrote {output}" + (f" (previous version kept as {backup})" if backup else ""), highlight=False, markup=False)


@app.command(
    epilog="Examples:\n\n  provision rankfile 4x2x3 --hosts sys-89074,sys-89075,sys-89076,sys-89077,sys-89078,sys-89079 -o 4x2x3.rf\n\n"  # noqa: E501 - one literal, kept whole to be read or grepped
    "  provision rankfile --check 2x10core.rf      # which lines name cores that do not exist"
)
def rankfile(
    dims: str = typer.Argument(None, help="XxYxZ: X GPUs (learners) per host, Y hosts per rack, Z racks."),
    hosts: str = HOSTS,
    inventory: Path = opt.INVENTORY,
    facts_dir: Path = opt.FACTS_DIR,
    output: Path = typer.Option(None, "-o", "--output", help="Write here (atomically; an old file is kept as FILE~)."),
    check: Path = typer.Option(None, "--check", help="Validate an existing rank file against the facts instead."),
    probe: bool = PROBE,
    allow_no_gpu: bool = ALLOW_NO_GPU,
    no_gpu_affinity: bool = NO_AFFINITY,
    forks: int = opt.FORKS,
    connect_timeout: float = opt.CONNECT_TIMEOUT,
    command_timeout: float = opt.COMMAND_TIMEOUT,
    accept_new_host_keys: bool = opt.ACCEPT_NEW,
    known_hosts: Path = opt.KNOWN_HOSTS,
    ssh_config: Path = opt.SSH_CONFIG,
) -> None:
    """Write an MPI rank file (rank_gen numbering) with slots from each host's probed cores."""
    settings = opt.probe_settings(forks, connect_timeout, command_timeout, accept_new_host_keys, known_hosts, ssh_config)
    if check is not None:
        try:
            text = check.read_text()
        except OSError as error:
            raise fail(f"{check}: cannot read: {error.strerror}") from None
        lines = parse_rankfile(text, str(check))
        facts = {}
        for name in sorted({line.host for line in lines}):
            try:
                facts[name] = load_host(facts_dir, name)
            except FactsError as error:
                if (facts_dir / f"{name}.json").exists():  # corrupt: say so once; absent: per line below
                    stderr.print(f"[yellow]warning[/yellow]: {escape(str(error))}", highlight=False, soft_wrap=True)
        problems = check_rankfile(lines, facts, str(check))
        for problem in problems:
            typer.echo(problem)
        if problems:
            raise typer.Exit(1)
        typer.echo(f"{check}: {len(lines)} ranks, every host, socket and core exists")
        return
    if dims is None:
        raise fail("give dims XxYxZ (or --check FILE)")
    plan = make_plan(dims, hosts, inventory, facts_dir, settings if probe else None, allow_no_gpu, no_gpu_affinity)
    _write_or_print(render_rankfile(plan, _now()), output)


@app.command(
    epilog="Examples:\n\n  provision launch 4x2x1 --ddl-mode n --dev-sync 1 -- caffe train -solver s.prototxt -gpu 0 -bvlc\n\n"
    "  provision launch 4x2x1 --format horovod -- python train.py\n\n  provision launch 2x2x1 --allow-no-gpu --run -- hostname"
)
def launch(
    dims: str = typer.Argument(..., help="XxYxZ."),
    command: list[str] = typer.Argument(None, help="The program and its arguments, after --."),
    hosts: str = HOSTS,
    inventory: Path = opt.INVENTORY,
    facts_dir: Path = opt.FACTS_DIR,
    rankfile_out: Path = typer.Option(
        None,
        "--rankfile",
        help="Where to write the rank file (default: ./XxYxZ.rf; OpenMPI 5's hostfile goes beside it as .hosts).",
    ),
    export: list[str] = typer.Option(
        [], "-x", "--export", help="Also pass this environment variable (-x NAME or -x NAME=VALUE; checked against NCCL's rules)."
    ),
    common_rails: bool = typer.Option(
        False, "--common-rails", help="Hosts' RDMA rails differ: use only those every host has (else launch refuses)."
    ),
    iface: str = typer.Option(None, "--iface", help="btl_tcp_if_include interface (default: one up on every host)."),
    ddl_mode: str = typer.Option(None, "--ddl-mode", help="DDL -mode letter: b, n, r, m, c or p."),
    dev_sync: int = typer.Option(None, "--dev-sync", help="DDL -dev_sync 0|1|2."),
    dump_iter: int = typer.Option(None, "--dump-iter", help="DDL -dump_iter N."),
    report_bindings: bool = typer.Option(
        False, "--report-bindings", help="Add mpirun --report-bindings (with --run: check them against the plan)."
    ),
    allow_run_as_root: bool = typer.Option(
        False, "--allow-run-as-root", help="Pass mpirun's own --allow-run-as-root (OpenMPI refuses root without it)."
    ),
    fmt: str = typer.Option(
        None,
        "--format",
        help="Print another launcher's command instead, with the same settings in its own form: horovod "
        "(horovodrun), deepspeed (DeepSpeed's openmpi launcher), torchrun (one command per host); a Slurm batch "
        "script (sbatch); or the host list alone (hostfile).",
    ),
    run: bool = typer.Option(
        False, "--run", help="Run it from the first host over SSH in a terminal (Ctrl-C stops mpirun), streaming its output."
    ),
    no_doctor: bool = typer.Option(
        False, "--no-doctor", help="With --run: skip doctor's fast checks (reach, pairwise SSH, software, limits) first."
    ),
    pick_healthy: bool = typer.Option(
        False,
        "--pick-healthy",
        help="Fill Y·Z from the candidates that pass doctor's fast checks, rack by rack; name those left out.",
    ),
    perf: bool = typer.Option(False, "--perf", help="With --pick-healthy: also leave out what doctor --perf finds."),
    budget: str = typer.Option(None, "--budget", help="With --perf: doctor --perf's time budget (60s, 5m)."),
    probe: bool = PROBE,
    allow_no_gpu: bool = ALLOW_NO_GPU,
    no_gpu_affinity: bool = NO_AFFINITY,
    forks: int = opt.FORKS,
    connect_timeout: float = opt.CONNECT_TIMEOUT,
    command_timeout: float = opt.COMMAND_TIMEOUT,
    accept_new_host_keys: bool = opt.ACCEPT_NEW,
    known_hosts: Path = opt.KNOWN_HOSTS,
    ssh_config: Path = opt.SSH_CONFIG,
) -> None:
    """Print (or --run) the mpirun command for a rank file made from the facts."""
    settings = opt.probe_settings(forks, connect_timeout, command_timeout, accept_new_host_keys, known_hosts, ssh_config)
    if pick_healthy or perf:
        from provision.cli.healthy_cmd import healthy_hosts

        hosts = healthy_hosts(dims, hosts, inventory, settings, perf, budget)
    plan = make_plan(dims, hosts, inventory, facts_dir, settings if probe else None, allow_no_gpu, no_gpu_affinity)
    local = rankfile_out or Path(f"{plan.dims}.rf")
    nic_plan = plan_nics(plan, iface, common_rails=common_rails)  # a PlanError (no common interface, rails differ) exits 2
    for note in nic_plan.notes:
        stderr.print(f"[yellow]note[/yellow]: {escape(note)}", highlight=False, soft_wrap=True)
    for warning in export_warnings(plan, nic_plan, export):
        stderr.print(f"[yellow]warning[/yellow]: {escape(warning)}", highlight=False, soft_wrap=True)
    if run and fmt is not None:
        raise fail(f"--run starts mpirun itself; with --format {fmt}, run the printed command (on the first host)")
    if fmt is not None and fmt != "sbatch":
        if ddl_mode or dev_sync is not None or dump_iter is not None:
            raise fail(f"--ddl-mode, --dev-sync and --dump-iter are DDL's (mpirun -ddl): --format {fmt} has no DDL")
        form = launch_form(
            fmt,
            plan,
            nic_plan,
            str(local),
            render_rankfile(plan, _now()),
            list(command or []),
            export=export,
            allow_run_as_root=allow_run_as_root,
            report_bindings=report_bindings,
        )
        for file in form.files:
            _say_written(file.what, Path(file.path), write_atomic(Path(file.path), file.text))
        for note in form.notes:
            stderr.print(f"provision: {note}", highlight=False, soft_wrap=True, markup=False)
        typer.echo(form.command, nl=False)
        return
    wrapper_text = wrapper_script(plan, nic_plan, skip=frozenset(export_values(export))) if nic_plan.per_rank else None
    wrapper_local = Path(sibling(str(local), ".nic.sh"))
    ddl = DdlOptions(ddl_mode, dev_sync, dump_iter) if ddl_mode else None
    if ddl is None and (dev_sync is not None or dump_iter is not None):
        raise fail("--dev-sync and --dump-iter need --ddl-mode")
    if fmt == "sbatch":
        opts = {"export": export, "iface": iface, "ddl": ddl, "report_bindings": report_bindings}
        script = sbatch_script(
            plan,
            render_rankfile(plan, _now()),
            lambda rf, hf: mpirun_argv(
                plan, rf, list(command or []), hostfile_path=hf, **opts, allow_run_as_root=allow_run_as_root, wrapper=wrapper_text
            ),
            _now(),
            allocation_hostfile(plan, f"{plan.dims}.rf") if needs_hostfile(plan) else None,
        )
        typer.echo(script, nl=False)
        return
    local_hosts = Path(sibling(str(local), ".hosts")) if needs_hostfile(plan) else None
    if local_hosts == local:  # --rankfile x.hosts: keep both
        local_hosts = local.with_name(local.name + ".hosts")
    rankfile_text = render_rankfile(plan, _now())
    hosts_text = allocation_hostfile(plan, local.name) if local_hosts else None
    remote = {f"{plan.dims}.rf": rankfile_text} | ({f"{plan.dims}.hosts": hosts_text} if hosts_text else {})
    if wrapper_text is not None:
        remote[f"{plan.dims}.nic.sh"] = wrapper_text

    def argv_for(directory: str | None, unset: frozenset[str] = frozenset(), no_tree_spawn: bool = False) -> list[str]:
        """The mpirun command with the local files, or with the copies in ``directory`` on the first
        host (``unset``: default -x variables that are not set there)."""
        rf, hf = (
            (str(local), str(local_hosts))
            if directory is None
            else (f"{directory}/{plan.dims}.rf", f"{directory}/{plan.dims}.hosts")
        )
        return mpirun_argv(
            plan,
            rf,
            list(command or []),
            export=export,
            iface=iface,
            ddl=ddl,
            report_bindings=report_bindings,
            hostfile_path=hf if hosts_text else None,
            allow_run_as_root=allow_run_as_root,
            unset_env=unset,
            wrapper=wrapper_text,
            no_tree_spawn=no_tree_spawn,
        )

    argv = argv_for(None)  # refuses bad options before anything is written or run
    _say_written("rank file", local, write_atomic(local, rankfile_text))
    if local_hosts is not None:
        _say_written("hostfile", local_hosts, write_atomic(local_hosts, hosts_text))
    if wrapper_text is not None:
        _say_written("per-rank wrapper", wrapper_local, write_atomic(wrapper_local, wrapper_text))
    from provision.launch.runner import login_user, run_from_first_host

    first = open_inventory(inventory).resolve([plan.hosts[0].host])[0]
    options = settings.ssh
    if not run:
        if login_user(first, options) == "root" and not allow_run_as_root:
            stderr.print(f"[yellow]warning[/yellow]: {escape(root_message(first.name, 'root'))}", highlight=False, soft_wrap=True)
        typer.echo(quoted(argv))
        return
    if not no_doctor:
        from provision.cli.doctor_cmd import print_checks
        from provision.doctor.runner import fast_checks

        results = fast_checks(open_inventory(inventory).resolve([h.host for h in plan.hosts]), options, settings.forks)
        if any(r.status == "fail" for r in results):
            print_checks(results, SafeConsole(stderr=True))
            stderr.print("provision: not launched: a doctor check failed (--no-doctor to launch anyway)", markup=False)
            raise typer.Exit(1)
        for result in results:
            if result.name == "pairwise ssh" and result.status == "warn":  # the nodes cannot all reach each other
                stderr.print(f"provision: warning: {result.name}: {result.detail}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(
        run_from_first_host(first, options, plan, remote, argv_for, allow_run_as_root=allow_run_as_root, check=report_bindings)
    )


@app.command(
    epilog="Examples:\n\n  provision topology 4x2x1 --hosts sys-89074,sys-89075\n\n  provision topology 4x2x3 --svg layout.svg"
)
def topology(
    dims: str = typer.Argument(..., help="XxYxZ."),
    hosts: str = HOSTS,
    inventory: Path = opt.INVENTORY,
    facts_dir: Path = opt.FACTS_DIR,
    svg_out: Path = typer.Option(None, "--svg", help="Also write an SVG picture here."),
    probe: bool = PROBE,
    allow_no_gpu: bool = ALLOW_NO_GPU,
    no_gpu_affinity: bool = NO_AFFINITY,
    forks: int = opt.FORKS,
    connect_timeout: float = opt.CONNECT_TIMEOUT,
    command_timeout: float = opt.COMMAND_TIMEOUT,
    accept_new_host_keys: bool = opt.ACCEPT_NEW,
    known_hosts: Path = opt.KNOWN_HOSTS,
    ssh_config: Path = opt.SSH_CONFIG,
) -> None:
    """Show which rank is bound to which cores, and which GPU it drives: racks → hosts → sockets."""
    settings = opt.probe_settings(forks, connect_timeout, command_timeout, accept_new_host_keys, known_hosts, ssh_config)
    plan = make_plan(dims, hosts, inventory, facts_dir, settings if probe else None, allow_no_gpu, no_gpu_affinity)
    try:
        nic_plan = plan_nics(plan)
    except PlanError as error:  # no common interface: the NICs are still worth drawing
        stderr.print(f"[yellow]note[/yellow]: {escape(str(error))}", highlight=False, soft_wrap=True)
        nic_plan = plan_nics(plan, iface="", common_rails=True)
    for note in nic_plan.notes:
        stderr.print(f"[yellow]note[/yellow]: {escape(note)}", highlight=False, soft_wrap=True)
    SafeConsole().print(rich_tree(plan, nic_plan))
    if svg_out is not None:
        _write_or_print(svg(plan), svg_out)


def fact_host_names(hosts: list[str] | None, inventory: Path | None, facts_dir: Path) -> list[str]:
    """The hosts a facts-only command covers: those named, else every host of the inventory, else
    (no inventory) every host with facts in ``facts_dir``; never an empty list."""
    inv, targets = resolve_targets(inventory, hosts or [])
    names = [host.name for host in targets] if (hosts or inv.path is not None) else cached_hosts(facts_dir)
    if not names:
        raise fail(f"no hosts: name some, give an inventory (-i), or probe hosts into {facts_dir}/ first")
    return names


@app.command(
    "slurm-nodes",
    epilog="Examples:\n\n  provision slurm-nodes gpu > nodes.conf && cat nodes.conf >> /etc/slurm/slurm.conf\n\n"
    "  provision slurm-nodes -i inventory/hosts.yml all",
)
def slurm_nodes(
    hosts: list[str] = typer.Argument(
        None, help="Hosts or groups (default: every host of the inventory; without one, every host in --facts-dir)."
    ),
    inventory: Path = opt.INVENTORY,
    facts_dir: Path = opt.FACTS_DIR,
) -> None:
    """slurm.conf NodeName lines from facts, in slurmd -C's format, with Gres=gpu:N.

    All or nothing: every host's facts are read first, and nothing is printed unless all of them
    are there, so a failed run appended to slurm.conf leaves no partial list behind."""
    names = fact_host_names(hosts, inventory, facts_dir)
    found, problems = [], []
    for name in names:
        try:
            found.append(load_host(facts_dir, name))
        except FactsError as error:
            problems.append(str(error))
    problems.extend(identity_problems(found).values())  # a reserved word or another host's name
    if problems:
        for problem in problems[:-1]:
            stderr.print(f"provision: error: {problem}", highlight=False, soft_wrap=True, markup=False)
        raise fail(
            f"{problems[-1]}"
            + (f" ({len(problems)} of {len(names)} hosts have no usable facts)" if len(names) > 1 else "")
            + "; nothing printed"
        )
    for facts in found:
        typer.echo(slurm_node_line(facts))
        note = uneven_note(facts)
        if note:
            stderr.print(f"warning: {note}", highlight=False, soft_wrap=True, markup=False)
