"""The per-rank wrapper: a POSIX sh script that sets each rank's GPU and NIC, then runs the program.

It reads the rank's local rank from what the launcher sets (OpenMPI's
``OMPI_COMM_WORLD_LOCAL_RANK``, torchrun's and DeepSpeed's ``LOCAL_RANK``, Horovod's
``HOROVOD_LOCAL_RANK``, Slurm's ``SLURM_LOCALID``) and exports what each stack reads, by NCCL's
own rules (docs/how-to/probe-and-launch.md, "What launch sets"; each rule a case in
tests/fixtures/nccl_rules.json, citing its source or saying it is our choice):

- per host, the same for every rank of it: ``CUDA_VISIBLE_DEVICES`` with
  ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (so an index means the GPU nvidia-smi and the facts number so):
  the host's planned GPUs in local-rank order, so device ``LOCAL_RANK`` is the rank's planned GPU,
  the one a program picks by ``cuda:LOCAL_RANK`` or Horovod's ``set_device(hvd.local_rank())``
  (:func:`visible_devices`); with ``own_gpu_only`` each rank its own GPU alone (device 0), as
  Slurm's ``--gpu-bind=single:1`` and jsrun's ``-g1`` give it. ``NCCL_IB_HCA==mlx5_0:1,...``
  (the host's rails, :mod:`provision.plans.rails`: NCCL picks each GPU's nearest itself) and on
  RoCE ``NCCL_IB_GID_INDEX``;
- per rank: ``UCX_NET_DEVICES=mlx5_0:1`` (MPI's own traffic, which UCX lets each process choose)
  and on RoCE ``UCX_IB_GID_INDEX``; and its planned cores, which the wrapper binds it to with
  ``taskset`` where no mpirun did (torchrun: ``PROVISION_HOST`` set, no ``OMPI_COMM_WORLD_RANK``);
- for the whole job: ``NCCL_SOCKET_IFNAME==IFACE`` (exact: never ``eth`` matching ``eth1``)
  with ``GLOO_SOCKET_IFNAME=IFACE`` (Gloo takes a plain name), ``NCCL_IB_DISABLE=1`` when
  ``--common-rails`` found no rail common to every host.

Under mpirun (every mpirun form: the plain/DDL line, sbatch, Horovod, DeepSpeed) it also exports
torch.distributed's ``env://`` names from OpenMPI's: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``
(torchrun sets them itself). When every host gets the same settings the table is keyed by local
rank alone; otherwise by host and local rank, the host being its inventory name, told by the
launcher, never what the node calls itself: mpirun's ``OMPI_COMM_WORLD_RANK`` (the rank file fixes
each rank's host) or ``PROVISION_HOST`` (set on each torchrun line). Variables the user sets with
``-x NAME=VALUE`` are left to the user's value.

Every value written into the script is checked here against a strict pattern (names from the
facts were checked when parsed; this is the last line): nothing a node sent goes into shell text
unchecked.
"""

from __future__ import annotations

import re

from provision import __version__
from provision.errors import PlanError, UnsafeValueError
from provision.facts.cpulist import format_ranges
from provision.plans.nics import NicPlan, RankNic
from provision.plans.rails import HostRails
from provision.plans.rankfile import RankPlan
from provision.text import shown_value

WRAPPER_NAME = "provision-rank"  # $0 of the wrapper when given inline (sh -c TEXT provision-rank ...)
_SAFE = re.compile(r"^[A-Za-z0-9_.:=,-]{1,1024}\Z")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
LOCAL_RANK = "${OMPI_COMM_WORLD_LOCAL_RANK:-${LOCAL_RANK:-${HOROVOD_LOCAL_RANK:-${SLURM_LOCALID:-}}}}"


def checked_value(value: str) -> str:
    """``value`` when it is safe in the wrapper's or an env file's text; else :class:`UnsafeValueError`."""
    if not _SAFE.match(value):
        raise UnsafeValueError(f"{shown_value(value[:40])} cannot go into the per-rank wrapper")
    return value


def _each_rank(gpus: list[int | None]) -> str:
    """``local rank 0 GPU 0, 1 GPU 1, 2 none``: what each rank of a host would get (bounded)."""
    shown = [f"{k} {'none' if g is None else f'GPU {g}'}" for k, g in enumerate(gpus[:16])]
    return "local rank " + ", ".join(shown) + (f" and {len(gpus) - 16} more" if len(gpus) > 16 else "")


def visible_devices(host: str, ranks: list[RankNic], *, own_gpu_only: bool = False) -> list[str | None]:
    """Each rank's ``CUDA_VISIBLE_DEVICES`` on ``host`` (``ranks`` by local rank).

    The host's planned GPUs in local-rank order, the same for every rank (``0,1,2,3``), so device
    ``LOCAL_RANK`` is the rank's planned GPU: what ``cuda:LOCAL_RANK`` and Horovod's
    ``set_device(hvd.local_rank())`` pick, and what torchrun (sets ``LOCAL_RANK`` only), DeepSpeed's
    launcher (one list for every local rank) and Slurm (a task's GPUs in ascending order) give.
    ``own_gpu_only``: each rank its own GPU alone (device 0). None for every rank when no rank has
    a GPU. :class:`PlanError` naming the host and what each rank would get when two ranks would
    share a GPU or only some ranks have one (``cuda:LOCAL_RANK`` would not exist for the others)."""
    gpus = [rank.gpu for rank in ranks]
    known = [g for g in gpus if g is not None]
    if not known:
        return [None] * len(gpus)
    if len(known) < len(gpus):
        raise PlanError(
            f"{host}: {len(known)} GPU(s) for {len(gpus)} ranks ({_each_rank(gpus)}): a rank without a GPU of its own "
            f"has no device LOCAL_RANK; run at most {len(known)} ranks a host, "
            "or pass -x CUDA_VISIBLE_DEVICES= for a CPU-only run"
        )
    if len(set(known)) < len(known):
        raise PlanError(f"{host}: two ranks would share one GPU ({_each_rank(gpus)}); NCCL refuses ranks on one GPU")
    if own_gpu_only:
        return [str(g) for g in known]
    return [",".join(str(g) for g in known)] * len(known)


def rank_settings(rank: RankNic, visible: str | None, host: HostRails | None = None) -> list[tuple[str, str]]:
    """The variables one rank gets, in order; ``visible``: its ``CUDA_VISIBLE_DEVICES``
    (:func:`visible_devices`); ``host``: its host's rails (``NCCL_IB_HCA``, one per host)."""
    settings = []
    if visible is not None:
        settings += [("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), ("CUDA_VISIBLE_DEVICES", visible)]
    if rank.hca() is not None:
        settings.append(("UCX_NET_DEVICES", rank.hca()))
    if host is not None and host.hca() is not None:
        settings.append(("NCCL_IB_HCA", host.hca()))
        if host.gid_index is not None:
            settings.append(("NCCL_IB_GID_INDEX", str(host.gid_index)))
    if rank.gid_index is not None:
        settings.append(("UCX_IB_GID_INDEX", str(rank.gid_index)))
    return settings


def host_settings(
    nics: NicPlan, host: str, *, own_gpu_only: bool = False, skip: frozenset[str] = frozenset()
) -> list[list[tuple[str, str]]]:
    """Each rank's variables on ``host``, by local rank (``skip``: what the user sets; a user's
    ``CUDA_VISIBLE_DEVICES`` also skips the check of the host's GPUs: it is the user's)."""
    ranks = nics.of_host(host)
    if "CUDA_VISIBLE_DEVICES" in skip:
        visible: list[str | None] = [None] * len(ranks)
    else:
        visible = visible_devices(host, ranks, own_gpu_only=own_gpu_only)
    return [rank_settings(rank, shown, nics.hosts.get(host)) for rank, shown in zip(ranks, visible, strict=True)]


def job_settings(nics: NicPlan) -> list[tuple[str, str]]:
    """The variables every rank gets."""
    settings = [("NCCL_IB_DISABLE", "1")] if nics.ib_disable else []
    if nics.interface:
        settings += [("NCCL_SOCKET_IFNAME", f"={nics.interface}"), ("GLOO_SOCKET_IFNAME", nics.interface)]
    return settings


# torch.distributed's env:// names from OpenMPI's, under mpirun only (torchrun sets them itself):
# OpenMPI 4 (orte/mca/schizo/ompi) and 5 (OpenPMIx's pmdl/ompi) set these three in every rank.
ENV_NAMES_FROM_MPI = (("RANK", "OMPI_COMM_WORLD_RANK"), ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"),
                      ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"))  # fmt: skip


def _env_names_line(skip: frozenset[str]) -> str:
    names = " ".join(f'{name}="${mpi}"' for name, mpi in ENV_NAMES_FROM_MPI if name not in skip)
    return f'if [ -n "${{OMPI_COMM_WORLD_RANK:-}}" ]; then export {names}; fi' if names else ":"


def _exports(settings: list[tuple[str, str]], skip: frozenset[str] = frozenset()) -> str:
    kept = [(name, value) for name, value in settings if name not in skip]
    return "export " + " ".join(f"{name}={checked_value(value)}" for name, value in kept) if kept else ":"


def host_label(host: str) -> str:
    """``host`` (an inventory name) when it is safe as a ``case`` label; else :class:`UnsafeValueError`."""
    if not _HOST.fullmatch(host):
        raise UnsafeValueError(f"host name {shown_value(host[:40])} cannot go into the per-rank wrapper")
    return host


def planned_cpus(plan: RankPlan) -> dict[int, str]:
    """{rank: its planned cores' CPUs (``4-7``, the OS numbers ``taskset`` takes)}."""
    facts = {f.host: f for f in plan.facts}
    cpus = {}
    for slot in plan.slots():
        cores = facts[slot.host].cpu.sockets[slot.socket].cores
        wanted = range(slot.first_core, slot.last_core + 1)
        cpus[slot.rank] = format_ranges([cpu for core in cores if core.index in wanted for cpu in core.cpus])
    return cpus


# Where no mpirun bound the rank (torchrun: it binds nothing), the wrapper binds it to its planned cores.
_BIND = (
    'if [ -n "${PROVISION_HOST:-}" ] && [ -z "${OMPI_COMM_WORLD_RANK:-}" ] && [ -n "$c" ]; then\n'
    '  if command -v taskset >/dev/null 2>&1; then exec taskset -c "$c" "$@"; fi\n'
    f'  echo "{WRAPPER_NAME}: taskset not found: local rank $r runs on every core, not its planned $c" >&2\n'
    "fi"
)


def wrapper_script(plan: RankPlan, nics: NicPlan, *, own_gpu_only: bool = False, skip: frozenset[str] = frozenset()) -> str:
    """The wrapper's text (see the module docstring); run as ``sh FILE PROGRAM ARGS...``.

    Each rank sees its host's planned GPUs in local-rank order (``CUDA_VISIBLE_DEVICES=0,1,2,3``:
    device LOCAL_RANK is its own); ``own_gpu_only``: its own GPU alone (device 0). ``skip``:
    variables the user sets (``-x NAME=VALUE``), not exported here. :class:`PlanError` when a
    host's ranks cannot each have a GPU of their own (:func:`visible_devices`)."""
    hosts = [h.host for h in sorted(plan.hosts, key=lambda h: h.index)]
    cpus = planned_cpus(plan)
    tables = {}
    for host in hosts:
        settings = host_settings(nics, host, own_gpu_only=own_gpu_only, skip=skip)
        ranks = nics.of_host(host)
        tables[host] = [f"{_exports(s, skip)}; c={checked_value(cpus[r.rank])}" for r, s in zip(ranks, settings, strict=True)]
    same = len({tuple(t) for t in tables.values()}) == 1
    devices = (
        "each rank its own GPU alone: the program uses device 0"
        if own_gpu_only
        else "the host's GPUs in local-rank order: device LOCAL_RANK is the rank's own"
    )
    lines = [
        "#!/bin/sh",
        f"# provision {__version__}: each rank's GPU and NIC for {plan.dims}, from the probed facts.",
        "# Run the program through it on every rank: mpirun ... sh THIS-FILE PROGRAM ARGS...",
        f"# CUDA_VISIBLE_DEVICES: {devices}.",
        f"r={LOCAL_RANK}",
        'case "$r" in',
        f"''|*[!0-9]*) echo \"{WRAPPER_NAME}: no local rank (OMPI_COMM_WORLD_LOCAL_RANK, LOCAL_RANK, "
        'HOROVOD_LOCAL_RANK or SLURM_LOCALID)" >&2; exit 2 ;;',
        "esac",
        _exports(job_settings(nics), skip),
        _env_names_line(skip),
    ]
    if same:
        key = '"$r"'
        cases = [(str(i), line) for i, line in enumerate(tables[hosts[0]])]
    else:  # the host by the launcher's word (the inventory name), never by what the node calls itself
        lines += ['h="${PROVISION_HOST:-}"', '[ -n "$h" ] || case "${OMPI_COMM_WORLD_RANK:-}" in']
        for host_plan in sorted(plan.hosts, key=lambda h: h.index):
            ranks = "|".join(str(slot.rank) for slot in sorted(host_plan.slots, key=lambda s: s.rank))
            lines.append(f"{ranks}) h={host_label(host_plan.host)} ;;")
        lines.append("esac")
        key = '"$h/$r"'
        cases = [(f"{host_label(host)}/{i}", line) for host in hosts for i, line in enumerate(tables[host])]
    lines.append(f"case {key} in")
    lines += [f"{label}) {line} ;;" for label, line in cases]
    where = "" if same else " on host '$h' (OMPI_COMM_WORLD_RANK or PROVISION_HOST)"
    lines.append(f'*) echo "{WRAPPER_NAME}: local rank $r is not in the plan for {plan.dims}{where}" >&2; exit 2 ;;')
    lines += ["esac", _BIND, 'exec "$@"', ""]
    return "\n".join(lines)


def inline_argv(script: str, command: list[str]) -> list[str]:
    """``sh -c SCRIPT provision-rank COMMAND...``: the wrapper travels with mpirun's command line,
    so it needs no copy on the other hosts (mpirun passes each argument whole)."""
    return ["sh", "-c", script, WRAPPER_NAME, *command]
