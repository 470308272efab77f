"""mpirun command lines, DDL options and hostfiles, from a rank plan and the hosts' facts."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from provision.errors import PlanError, UnsafeValueError
from provision.facts.model import HostFacts
from provision.launch.wrapper import inline_argv
from provision.plans.dims import Dims
from provision.plans.nics import check_interface, fabric_interface
from provision.plans.rankfile import RankPlan, some_names as _some
from provision.text import shown_value

DDL_MODES = {
    "b": "enhanced NCCL where possible, else ring",
    "n": "NCCL where possible, else ring",
    "r": "ring only",
    "m": "MPI reduce_scatter + all_gatherV only",
    "c": "RCS only",
    "p": "exploration: best algorithm per dimension",
}
DEFAULT_EXPORTS = ("PATH", "LD_LIBRARY_PATH")  # the seed's -x PATH -x LD_LIBRARY_PATH
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_ENV_VALUE = re.compile(r"[^\x00-\x1f\x7f]{0,4096}")  # printable: it is shown, quoted, in the command
_VERSION = re.compile(r"([0-9]{1,4})\.([0-9]{1,4})(?:[.A-Za-z0-9~+_-]{0,40})")


@dataclass(frozen=True)
class DdlOptions:
    """The ``-ddl "..."`` option string's parts."""

    mode: str
    dev_sync: int | None = None
    dump_iter: int | None = None

    def text(self, dims: Dims) -> str:
        """``-mode n:4x2x3 -dev_sync 1 -dump_iter 100``."""
        parts = [f"-mode {self.mode}:{dims}"]
        if self.dev_sync is not None:
            parts.append(f"-dev_sync {self.dev_sync}")
        if self.dump_iter is not None:
            parts.append(f"-dump_iter {self.dump_iter}")
        return " ".join(parts)


def check_ddl(ddl: DdlOptions, ranks: int, dims: Dims) -> None:
    """Refuse options DDL itself would refuse at start-up (its ``invalid dim size`` error)."""
    if ddl.mode not in DDL_MODES:
        raise PlanError(f"--ddl-mode {shown_value(ddl.mode)}: one of {', '.join(DDL_MODES)}")
    if ddl.dev_sync not in (None, 0, 1, 2):
        raise PlanError("--dev-sync must be 0, 1 or 2")
    if ddl.dump_iter is not None and ddl.dump_iter < 1:
        raise PlanError("--dump-iter must be at least 1")
    if ranks != dims.learners:
        raise PlanError(f"invalid dim size: mpirun -n {ranks} but -mode {ddl.mode}:{dims} has {dims.learners} learners")


def openmpi_version(facts_list: list[HostFacts]) -> tuple[int, int]:
    """The (major, minor) OpenMPI version all hosts share; refuses missing or mixed versions."""
    missing = [f.host for f in facts_list if not f.openmpi.version]
    if missing:
        raise PlanError(f"OpenMPI is not installed on: {_some(missing)}")
    for facts in facts_list:  # a node's word: one line naming it, never a traceback
        if not _VERSION.fullmatch(facts.openmpi.version):
            raise PlanError(f"{facts.host}: OpenMPI version {shown_value(facts.openmpi.version[:40])} is not MAJOR.MINOR[.PATCH]")
    series = {f.host: ".".join(f.openmpi.version.split(".")[:2]) for f in facts_list}
    if len(set(series.values())) > 1:
        by_version: dict[str, list[str]] = {}
        for facts in facts_list:
            by_version.setdefault(facts.openmpi.version, []).append(facts.host)
        listing = "; ".join(f"{version} on {_some(hosts)}" for version, hosts in sorted(by_version.items()))
        raise PlanError(f"OpenMPI versions differ across hosts ({listing}): mpirun needs the same everywhere")
    major, minor = next(iter(series.values())).split(".")
    return int(major), int(minor)


def check_export(name: str) -> str:
    """``name`` when it is an environment variable's name, or ``NAME=VALUE`` with a printable
    value (mpirun's ``-x`` takes both); else :class:`UnsafeValueError`."""
    variable, given, value = name.partition("=")
    if not _ENV_NAME.match(variable) or (given and not _ENV_VALUE.fullmatch(value)):
        raise UnsafeValueError(f"-x {shown_value(name[:60])}: not NAME or NAME=VALUE (an environment variable)")
    return name


def rankfile_option(version: tuple[int, int], path: str) -> list[str]:
    """``-rf FILE`` up to OpenMPI 4; ``--map-by rankfile:file=FILE`` from 5 on."""
    return ["--map-by", f"rankfile:file={path}"] if version[0] >= 5 else ["-rf", path]


def needs_hostfile(plan: RankPlan) -> bool:
    """True when the hosts' OpenMPI maps a rank file only onto allocated hosts (PRRTE, v5 on).

    OpenMPI 4 (ORTE) takes the hosts from the rank file itself; OpenMPI 5 refuses a rank file
    host that is not in the allocation ("either not allocated or oversubscribed its slots"), so
    the allocation is given as a hostfile beside the rank file (``--hostfile``)."""
    return openmpi_version(list(plan.facts))[0] >= 5


def _no_tree_spawn(version: tuple[int, int]) -> list[str]:
    """mpirun options for nodes that cannot SSH to each other: mpirun starts every daemon itself.

    OpenMPI 4 (ORTE): ``plm_rsh_no_tree_spawn``; OpenMPI 5 (PRRTE 3): ``plm_ssh_no_tree_spawn``
    (the names ``prte_info --all`` lists). Both proven at 128 hosts. PRRTE 3.0's daemon can miss
    the exit of a rank that ends within milliseconds of its start (its output closes before the
    daemon marks it running; the wait never fires) and mpirun then never returns, with or
    without the tree: a bug of PRRTE's, not of the tree, seen on 5.0.7 with ``true`` as the
    program, never with one that runs a second."""
    if version[0] < 5:
        return ["--mca", "plm_rsh_no_tree_spawn", "1"]
    return ["--prtemca", "plm_ssh_no_tree_spawn", "1"]


def mpirun_argv(
    plan: RankPlan,
    rankfile_path: str,
    command: list[str],
    *,
    export: list[str] = (),
    iface: str | None = None,
    ddl: DdlOptions | None = None,
    report_bindings: bool = False,
    hostfile_path: str | None = None,
    allow_run_as_root: bool = False,
    unset_env: frozenset[str] = frozenset(),
    wrapper: str | None = None,
    no_tree_spawn: bool = False,
) -> list[str]:
    """The mpirun argument vector (quote with :func:`shlex.join` to print it).

    ``hostfile_path`` is the allocation (:func:`allocation_hostfile`), required from OpenMPI 5 on;
    ``allow_run_as_root`` passes mpirun's own ``--allow-run-as-root`` (never added otherwise);
    ``unset_env``: variables not set where mpirun starts, so the :data:`DEFAULT_EXPORTS` among
    them are left out (mpirun warns about each ``-x`` of an unset variable); a ``--export`` the
    user named is always passed; ``wrapper``: the per-rank wrapper's text, run inline before the
    command (:func:`provision.launch.wrapper.inline_argv`); ``no_tree_spawn``: mpirun starts every
    daemon itself (for nodes that cannot SSH to each other)."""
    if not command:
        raise PlanError("no command to launch: put it after --, e.g. provision launch 4x2x1 -- python train.py")
    facts_list = list(plan.facts)
    version = openmpi_version(facts_list)
    argv = ["mpirun", "-n", str(plan.dims.learners), *rankfile_option(version, rankfile_path)]
    if version[0] >= 5:
        if hostfile_path is None:
            raise PlanError(f"OpenMPI {version[0]}.{version[1]} maps a rank file only onto allocated hosts: a hostfile is needed")
        argv += ["--hostfile", hostfile_path]
    if allow_run_as_root:
        argv.append("--allow-run-as-root")
    for name in dict.fromkeys([*DEFAULT_EXPORTS, *export]):  # in order, once each
        if name in unset_env and name not in export:
            continue
        argv += ["-x", check_export(name)]
    chosen = check_interface(iface, facts_list) if iface is not None else fabric_interface(facts_list)
    if chosen is not None:
        argv += ["--mca", "btl_tcp_if_include", chosen]
    if no_tree_spawn:
        argv += _no_tree_spawn(version)
    if report_bindings:
        argv.append("--report-bindings")
    argv += inline_argv(wrapper, list(command)) if wrapper is not None else list(command)
    if ddl is not None:
        if "-ddl" in command:
            raise PlanError("the command already has -ddl; drop it or drop --ddl-mode")
        check_ddl(ddl, plan.dims.learners, plan.dims)
        argv += ["-ddl", ddl.text(plan.dims)]
    return argv


def hostfile(plan: RankPlan) -> str:
    """The planned hosts, ``host slots=X`` a line (OpenMPI's hostfile, also DeepSpeed's)."""
    return "".join(f"{host.host} slots={plan.dims.x}\n" for host in sorted(plan.hosts, key=lambda h: h.index))


def allocation_hostfile(plan: RankPlan, rankfile_name: str) -> str:
    """The OpenMPI hostfile that allocates exactly the planned hosts, X slots each (one a line)."""
    return f"# provision: the hosts and slots of {rankfile_name} (OpenMPI 5 maps a rank file only onto these)\n" + hostfile(plan)


ROOT_ADVICE = (
    "OpenMPI refuses to run as root unless told: pass --allow-run-as-root (mpirun's own switch) or launch as another user"
)


def root_message(host: str, user: str) -> str:
    """The one line saying that mpirun would start as root on ``host``."""
    return f"{host}: mpirun would run as root (login user {user}); {ROOT_ADVICE}"


def quoted(argv: list[str]) -> str:
    """A shell-safe one-line rendering of ``argv``."""
    return shlex.join(argv)
