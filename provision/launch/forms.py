"""The plan in the forms of launchers other than mpirun: horovodrun, deepspeed, torchrun, a hostfile.

Each gets the settings ``launch`` gives mpirun, in the launcher's own terms, plus the files they
name (written beside the rank file):

- **horovodrun** (MPI controller): ``-np``/``-H host:slots``, ``--network-interfaces IFACE``
  (Horovod turns it into ``btl_tcp_if_include`` and ``NCCL_SOCKET_IFNAME=IFACE``, a prefix
  match, so ``--mpi-args`` passes the exact ``==IFACE`` after it: mpirun's last ``-x`` wins),
  ``--binding-args`` the rank file in place of Horovod's ``-bind-to none -map-by slot``. On one
  host no ``--network-interfaces`` (Horovod then wants the interface to hold 127.0.0.1).
- **deepspeed** (its ``openmpi`` launcher: one mpirun, nothing of DeepSpeed's on the workers but
  the program; ``--force_multi``, else on one host it skips its launcher, the rank file and the env
  file): ``--hostfile`` (``host slots=N``), ``--launcher_args`` the rank file and
  ``btl_tcp_if_include`` (without it DeepSpeed passes ``eth0``), ``--master_addr``, and the job's
  variables in DeepSpeed's env file (``DS_ENV_FILE``: ``NAME=VALUE`` lines, no comments, which
  its runner passes as ``-x``), ``MASTER_ADDR``/``MASTER_PORT`` among them so that with the
  wrapper's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` ``deepspeed.init_distributed()`` needs no MPI
  discovery.
- **torchrun**: one command per host, ``--nnodes/--node-rank/--master-addr``, the master an
  address of the first host in a subnet every other host has; ``PROVISION_HOST=HOST`` before it
  tells the wrapper which host's settings are its own (the inventory name, never the node's word),
  and the user's ``-x NAME=VALUE`` go there too.

The three run the program through the same per-rank wrapper as mpirun (each rank's
``CUDA_VISIBLE_DEVICES`` its host's GPUs in local-rank order, as the scripts written for them pick
``cuda:LOCAL_RANK``); with ``--own-gpu-only`` each rank sees its own GPU alone, which such a script
cannot use past local rank 0, and a note says so.

Horovod and DeepSpeed parse a value that begins with ``--`` as an option, so those values are
passed as ``--option=VALUE``. Their values are shell text to the launcher (Horovod runs mpirun
through ``sh -c``; DeepSpeed splits with :func:`shlex.split`), so every path in them is quoted.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import PurePath

from provision.errors import PlanError
from provision.launch.export_lint import export_values
from provision.launch.mpirun import DEFAULT_EXPORTS, allocation_hostfile, check_export, hostfile, openmpi_version, rankfile_option
from provision.launch.wrapper import checked_value, host_label, job_settings, wrapper_script
from provision.plans.nics import NicPlan, master_address
from provision.plans.rankfile import RankPlan
from provision.text import shown_value

FORMATS = ("hostfile", "horovod", "deepspeed", "torchrun")
MASTER_PORT = 29500  # torch.distributed's default


@dataclass(frozen=True)
class LaunchFile:
    """A file the printed command names: what it is, where, its text."""

    what: str
    path: str
    text: str


@dataclass(frozen=True)
class LaunchForm:
    """What ``launch --format F`` writes and prints."""

    files: tuple[LaunchFile, ...]
    command: str  # stdout
    notes: tuple[str, ...]  # stderr lines


def sibling(rankfile_path: str, suffix: str) -> str:
    """The path beside the rank file with ``suffix`` for its extension (``8x2x1.rf`` -> ``8x2x1.nic.sh``)."""
    path = PurePath(rankfile_path)
    return str(path.with_name(path.stem + suffix))


def deepspeed_env(nics: NicPlan, master: str, port: int = MASTER_PORT, skip: frozenset[str] = frozenset()) -> str:
    """DeepSpeed's env file: ``NAME=VALUE`` lines (its runner splits each at the first ``=`` and
    fails on any other line, so it has no comment).

    Where ranks get an RDMA port, ``UCX_TLS=all`` (UCX's own default) undoes the ``UCX_TLS=tcp``
    DeepSpeed's openmpi launcher exports: with the wrapper's ``UCX_NET_DEVICES=mlx5_0:1`` it
    would leave UCX (MPI's own traffic, mpi4py) no device at all. ``skip``: what the user sets."""
    settings = [*job_settings(nics), ("MASTER_ADDR", master), ("MASTER_PORT", str(port))]
    if any(rank.device is not None for rank in nics.ranks):
        settings.append(("UCX_TLS", "all"))
    return "".join(f"{name}={checked_value(value)}\n" for name, value in settings if name not in skip)


def horovodrun_argv(
    plan: RankPlan,
    nics: NicPlan,
    rankfile_path: str,
    command: list[str],
    *,
    wrapper_path: str | None,
    report_bindings: bool,
    values: dict[str, str] | None = None,
) -> list[str]:
    """``horovodrun --mpi`` with the plan's hosts, interface and rank file (see the module docstring);
    ``values``: the user's ``-x NAME=VALUE``, passed in ``--mpi-args`` after the plan's (they win)."""
    values = values or {}
    version = openmpi_version(list(plan.facts))
    hosts = ",".join(f"{h.host}:{plan.dims.x}" for h in sorted(plan.hosts, key=lambda h: h.index))
    argv = ["horovodrun", "-np", str(plan.dims.learners), "-H", hosts, "--mpi"]
    binding = rankfile_option(version, rankfile_path) + (["--report-bindings"] if report_bindings else [])
    argv.append("--binding-args=" + shlex.join(binding))
    if nics.interface and len(plan.hosts) > 1:  # on one host Horovod wants the named interface to hold 127.0.0.1
        argv += ["--network-interfaces", nics.interface]
    settings = [(name, value) for name, value in job_settings(nics) if name not in values] + list(values.items())
    if settings:
        argv.append("--mpi-args=" + shlex.join([arg for name, value in settings for arg in ("-x", f"{name}={value}")]))
    return argv + (["sh", wrapper_path] if wrapper_path else []) + list(command)


def deepspeed_argv(
    plan: RankPlan,
    nics: NicPlan,
    command: list[str],
    *,
    rankfile_path: str,
    hostfile_path: str,
    env_path: str,
    wrapper_path: str,
    master: str,
    export: list[str] = (),
    allow_run_as_root: bool = False,
    report_bindings: bool = False,
) -> list[str]:
    """``deepspeed --launcher openmpi`` with the plan's hosts, rank file, interface and master
    (see the module docstring); run from the directory the paths are relative to."""
    version = openmpi_version(list(plan.facts))
    launcher_args = rankfile_option(version, rankfile_path)
    if nics.interface:
        launcher_args += ["--mca", "btl_tcp_if_include", nics.interface]
    if allow_run_as_root:
        launcher_args.append("--allow-run-as-root")
    if report_bindings:
        launcher_args.append("--report-bindings")
    for name in dict.fromkeys([*DEFAULT_EXPORTS, *export]):
        launcher_args += ["-x", check_export(name)]
    return [
        "env",
        f"DS_ENV_FILE={env_path}",
        "deepspeed",
        "--hostfile",
        hostfile_path,
        "--launcher",
        "openmpi",
        "--force_multi",
        "--launcher_args=" + shlex.join(launcher_args),
        "--master_addr",
        master,
        "--master_port",
        str(MASTER_PORT),
        "--no_python",
        "sh",
        wrapper_path,
        *command,
    ]


def torchrun_lines(
    plan: RankPlan,
    nics: NicPlan,
    master: str,
    wrapper_path: str,
    command: list[str],
    port: int = MASTER_PORT,
    values: dict[str, str] | None = None,
) -> str:
    """One torchrun command per host (run each on its host), the rank's settings from the wrapper;
    ``values``: the user's ``-x NAME=VALUE``, set before torchrun."""
    hosts = sorted(plan.hosts, key=lambda h: h.index)
    wrapped = nics.per_rank or bool(nics.interface)
    lines = []
    for host in hosts:
        assignments = [f"{name}={shlex.quote(value)} " for name, value in (values or {}).items()]
        if wrapped:
            assignments.append(f"PROVISION_HOST={host_label(host.host)} ")
        argv = [
            "torchrun",
            f"--nnodes={len(hosts)}",
            f"--node-rank={host.index}",
            f"--nproc-per-node={plan.dims.x}",
            f"--master-addr={master}",
            f"--master-port={port}",
        ]
        if wrapped:
            argv += ["--no-python", "sh", wrapper_path]
        lines.append(f"# on {host.host}\n{''.join(assignments)}{shlex.join(argv + list(command))}")
    return "\n".join(lines) + "\n"


def _distinct(files: list[LaunchFile]) -> tuple[LaunchFile, ...]:
    """``files``, refused when two would be written to one path (``--rankfile x.hosts``)."""
    seen: dict[str, str] = {}
    for file in files:
        if file.path in seen:
            raise PlanError(f"--rankfile {file.path}: the {seen[file.path]} and the {file.what} would both be written there")
        seen[file.path] = file.what
    return tuple(files)


def _ignored(fmt: str, export: list[str], allow_run_as_root: bool, report_bindings: bool) -> list[str]:
    """Notes for the options ``fmt`` has no use for (named so, not dropped without a word)."""
    for name in export:
        check_export(name)
    names = [name for name in export if "=" not in name]  # NAME=VALUE are passed in each form
    if fmt == "horovod" and (names or allow_run_as_root):
        return [
            "horovodrun passes its whole environment to every rank and --allow-run-as-root to mpirun itself: "
            "--export NAME and --allow-run-as-root add nothing"
        ]
    if fmt == "torchrun":
        named = [opt for opt, given in (("--export NAME", names), ("--allow-run-as-root", allow_run_as_root),
                                         ("--report-bindings", report_bindings)) if given]  # fmt: skip
        return [f"torchrun runs no mpirun: {', '.join(named)} not used"] if named else []
    return []


def launch_form(
    fmt: str,
    plan: RankPlan,
    nics: NicPlan,
    rankfile_path: str,
    rankfile_text: str,
    command: list[str],
    *,
    export: list[str] = (),
    allow_run_as_root: bool = False,
    report_bindings: bool = False,
    own_gpu_only: bool = False,
) -> LaunchForm:
    """The files and the command of ``launch --format FMT`` (one of :data:`FORMATS`);
    ``own_gpu_only``: each rank sees its own GPU alone (:func:`provision.launch.wrapper.visible_devices`)."""
    if fmt not in FORMATS:
        raise PlanError(f"--format {shown_value(fmt)}: one of {', '.join(FORMATS)}, sbatch")
    wrapper_path = sibling(rankfile_path, ".nic.sh")
    # DeepSpeed needs the wrapper for the env:// names even where no rank has a GPU or NIC of its own,
    # torchrun for the job's interface (it has no option for it).
    values = export_values(list(export))
    wrapper = None
    if nics.per_rank or fmt == "deepspeed" or (fmt == "torchrun" and nics.interface):
        wrapper = wrapper_script(plan, nics, own_gpu_only=own_gpu_only, skip=frozenset(values))
    files = [LaunchFile("per-rank wrapper (copy it to every host, same path)", wrapper_path, wrapper)] if wrapper else []
    if fmt == "hostfile":
        notes = [f"set {name}={value} on every rank" for name, value in job_settings(nics)]
        return LaunchForm(tuple(files), hostfile(plan), tuple(notes))
    if not command:
        raise PlanError(f"--format {fmt}: no command to launch: put it after --, e.g. --format {fmt} -- python train.py")
    notes = _ignored(fmt, list(export), allow_run_as_root, report_bindings)
    if own_gpu_only and wrapper and any(rank.gpu is not None for rank in nics.ranks):
        notes.append(
            f"--own-gpu-only: each rank sees its own GPU alone, as device 0; a {fmt} script that picks cuda:LOCAL_RANK "
            "(or hvd.local_rank()) finds no such device past local rank 0"
        )
    if fmt == "torchrun":
        master = master_address(list(plan.facts), nics.interface)
        lines = torchrun_lines(plan, nics, master, wrapper_path, command, values=values)
        return LaunchForm(tuple(files), lines, tuple(notes))
    files.insert(0, LaunchFile("rank file", rankfile_path, rankfile_text))
    folder = str(PurePath(rankfile_path).parent)
    notes.append(
        f"run it on {plan.hosts[0].host} in the folder holding these files ({folder})"
        + (f", with {PurePath(wrapper_path).name} at the same path on every host" if wrapper else "")
    )
    if fmt == "horovod":
        argv = horovodrun_argv(
            plan,
            nics,
            rankfile_path,
            command,
            wrapper_path=wrapper_path if wrapper else None,
            report_bindings=report_bindings,
            values=values,
        )
        return LaunchForm(_distinct(files), shlex.join(argv) + "\n", tuple(notes))
    master = master_address(list(plan.facts), nics.interface)
    hosts_path, env_path = sibling(rankfile_path, ".hosts"), sibling(rankfile_path, ".deepspeed_env")
    files.append(LaunchFile("hostfile", hosts_path, allocation_hostfile(plan, PurePath(rankfile_path).name)))
    files.append(LaunchFile("DeepSpeed env file", env_path, deepspeed_env(nics, master, skip=frozenset(values))))
    argv = deepspeed_argv(
        plan,
        nics,
        command,
        rankfile_path=rankfile_path,
        hostfile_path=hosts_path,
        env_path=env_path,
        wrapper_path=wrapper_path,
        master=master,
        export=export,
        allow_run_as_root=allow_run_as_root,
        report_bindings=report_bindings,
    )
    return LaunchForm(_distinct(files), shlex.join(argv) + "\n", tuple(notes))
