"""One mpirun job as ``provision launch`` makes it: the files beside the rank file (the rank file,
OpenMPI 5's hostfile, the per-rank wrapper), their copies on the first host, and the mpirun
command for either place, decided once from the plan and the user's launch options; and
:func:`launch_output`, what ``launch`` writes and prints in each form (mpirun, ``--format``,
sbatch). Example::

    job = mpirun_job(plan, plan_nics(plan), LaunchOptions(["python", "train.py"]), now="2026-12-01 15:00:00")
    for file in job.files: write_atomic(Path(file.path), file.text)
    print(quoted(job.argv()))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from provision.errors import PlanError
from provision.launch.export_lint import check_gpu_exports, export_values
from provision.launch.forms import LaunchFile, LaunchForm, launch_form, sibling
from provision.launch.mpirun import DdlOptions, allocation_hostfile, mpirun_argv, needs_hostfile, quoted
from provision.launch.wrapper import wrapper_script
from provision.plans.nics import NicPlan
from provision.plans.rankfile import RankPlan, render_rankfile


@dataclass(frozen=True)
class LaunchOptions:
    """What the user asked of the launch: the program, exported variables, the TCP interface, DDL's
    options, the switches mpirun gets, where the rank file goes (None: ./XxYxZ.rf), and whether
    each rank sees its own GPU alone."""

    command: list[str]
    export: list[str] = field(default_factory=list)
    iface: str | None = None
    ddl_mode: str | None = None
    dev_sync: int | None = None
    dump_iter: int | None = None
    report_bindings: bool = False
    allow_run_as_root: bool = False
    rankfile: Path | None = None
    own_gpu_only: bool = False  # each rank sees its own GPU alone (device 0), not its host's in local-rank order

    def ddl(self) -> DdlOptions | None:
        """DDL's options (``-ddl``), or None; --dev-sync and --dump-iter alone are refused."""
        if self.ddl_mode:
            return DdlOptions(self.ddl_mode, self.dev_sync, self.dump_iter)
        if self.dev_sync is not None or self.dump_iter is not None:
            raise PlanError("--dev-sync and --dump-iter need --ddl-mode")
        return None

    def uses_ddl(self) -> bool:
        return bool(self.ddl_mode) or self.dev_sync is not None or self.dump_iter is not None


@dataclass(frozen=True)
class MpirunJob:
    """The local files (:attr:`files`, in the order they are written), the same texts by name for
    the first host (:attr:`remote`), and the mpirun command for either (:meth:`argv`)."""

    plan: RankPlan
    options: LaunchOptions
    rankfile: LaunchFile
    hostfile: LaunchFile | None
    wrapper: LaunchFile | None

    @property
    def files(self) -> list[LaunchFile]:
        return [file for file in (self.rankfile, self.hostfile, self.wrapper) if file is not None]

    @property
    def remote(self) -> dict[str, str]:
        """{name: text} of the files copied to a fresh folder on the first host by ``launch --run``."""
        named = ((".rf", self.rankfile), (".hosts", self.hostfile), (".nic.sh", self.wrapper))
        return {f"{self.plan.dims}{suffix}": file.text for suffix, file in named if file is not None}

    def argv(self, directory: str | None = None, unset: frozenset[str] = frozenset(), no_tree_spawn: bool = False) -> list[str]:
        """The mpirun command with the local files, or with the copies in ``directory`` on the first
        host (``unset``: default -x variables that are not set there)."""
        dims = self.plan.dims
        if directory is None:
            rankfile, hostfile = self.rankfile.path, self.hostfile.path if self.hostfile else None
        else:
            rankfile, hostfile = f"{directory}/{dims}.rf", f"{directory}/{dims}.hosts" if self.hostfile else None
        options = self.options
        return mpirun_argv(
            self.plan,
            rankfile,
            list(options.command),
            export=options.export,
            iface=options.iface,
            ddl=options.ddl(),
            report_bindings=options.report_bindings,
            hostfile_path=hostfile,
            allow_run_as_root=options.allow_run_as_root,
            unset_env=unset,
            wrapper=self.wrapper.text if self.wrapper else None,
            no_tree_spawn=no_tree_spawn,
        )


def rankfile_path(plan: RankPlan, options: LaunchOptions) -> Path:
    """Where the rank file goes: --rankfile, else ./XxYxZ.rf."""
    return options.rankfile or Path(f"{plan.dims}.rf")


def _wrapper(plan: RankPlan, nics: NicPlan, options: LaunchOptions) -> str | None:
    """The per-rank wrapper of the mpirun forms, when some rank has a GPU or NIC of its own."""
    if not nics.per_rank:
        return None
    return wrapper_script(plan, nics, own_gpu_only=options.own_gpu_only, skip=frozenset(export_values(options.export)))


def mpirun_job(plan: RankPlan, nics: NicPlan, options: LaunchOptions, now: str) -> MpirunJob:
    """The job's files and command; bad options (an export name, DDL's) are refused here, before
    anything is written or run."""
    local = rankfile_path(plan, options)
    hosts = Path(sibling(str(local), ".hosts")) if needs_hostfile(plan) else None
    if hosts == local:  # --rankfile x.hosts: keep both
        hosts = local.with_name(local.name + ".hosts")
    wrapper = _wrapper(plan, nics, options)
    job = MpirunJob(
        plan,
        options,
        LaunchFile("rank file", str(local), render_rankfile(plan, now)),
        LaunchFile("hostfile", str(hosts), allocation_hostfile(plan, local.name)) if hosts else None,
        LaunchFile("per-rank wrapper", sibling(str(local), ".nic.sh"), wrapper) if wrapper is not None else None,
    )
    job.argv()  # refuses bad options before anything is written or run
    return job


def sbatch_text(plan: RankPlan, nics: NicPlan, options: LaunchOptions, now: str) -> str:
    """``launch --format sbatch``: the batch script that writes the job's files and runs mpirun."""
    from provision.launch.sbatch import sbatch_script

    wrapper = _wrapper(plan, nics, options)
    ddl = options.ddl()

    def argv(rankfile: str, hostfile: str | None) -> list[str]:
        return mpirun_argv(
            plan,
            rankfile,
            list(options.command),
            hostfile_path=hostfile,
            export=options.export,
            iface=options.iface,
            ddl=ddl,
            report_bindings=options.report_bindings,
            allow_run_as_root=options.allow_run_as_root,
            wrapper=wrapper,
        )

    hostfile = allocation_hostfile(plan, f"{plan.dims}.rf") if needs_hostfile(plan) else None
    return sbatch_script(plan, render_rankfile(plan, now), argv, now, hostfile)


def launch_output(
    plan: RankPlan, nics: NicPlan, options: LaunchOptions, fmt: str | None, now: str
) -> tuple[LaunchForm, MpirunJob | None]:
    """What ``launch`` writes (the files, in order), then says (notes, stderr) and prints (stdout)
    in the form ``fmt`` (None: the plain mpirun line); for that plain form also the job, whose
    command ``--run`` starts on the first host. Bad options are refused here, before anything is
    written: DDL's options with another form, an export name, DDL's alone, a ``-x`` that would put
    a rank on another GPU than planned (:func:`provision.launch.export_lint.check_gpu_exports`)."""
    check_gpu_exports(nics, options.export, own_gpu_only=options.own_gpu_only)
    if fmt is not None and fmt != "sbatch":
        if options.uses_ddl():
            raise PlanError(f"--ddl-mode, --dev-sync and --dump-iter are DDL's (mpirun -ddl): --format {fmt} has no DDL")
        form = launch_form(
            fmt,
            plan,
            nics,
            str(rankfile_path(plan, options)),
            render_rankfile(plan, now),
            options.command,
            export=options.export,
            allow_run_as_root=options.allow_run_as_root,
            report_bindings=options.report_bindings,
            own_gpu_only=options.own_gpu_only,
        )
        return form, None
    if fmt == "sbatch":
        return LaunchForm((), sbatch_text(plan, nics, options, now), ()), None
    job = mpirun_job(plan, nics, options, now)
    return LaunchForm(tuple(job.files), quoted(job.argv()) + "\n", ()), job
