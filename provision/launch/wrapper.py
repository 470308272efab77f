"""The per-rank wrapper: a POSIX sh script that sets each rank's GPU and NIC, then runs the program.

It reads the rank's local rank from what the launcher sets (OpenMPI's
``OMPI_COMM_WORLD_LOCAL_RANK``, torchrun's and DeepSpeed's ``LOCAL_RANK``, Horovod's
``HOROVOD_LOCAL_RANK``, Slurm's ``SLURM_LOCALID``) and exports what each stack reads:
``CUDA_VISIBLE_DEVICES`` (with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so the index means the GPU
nvidia-smi and the facts number so; the rank's GPU alone, or for frameworks that pick
``cuda:LOCAL_RANK`` its host's GPUs in local-rank order), ``UCX_NET_DEVICES=mlx5_0:1``, ``NCCL_IB_HCA==mlx5_0:1``
(NCCL's ``=`` prefix: exactly that device, never a prefix match such as ``mlx5_1`` also matching
``mlx5_10``), on RoCE ``NCCL_IB_GID_INDEX``/``UCX_IB_GID_INDEX``, and for the whole job
``NCCL_SOCKET_IFNAME==IFACE`` (exact: never ``eth`` matching ``eth1`` or ``docker0``-like names)
with ``GLOO_SOCKET_IFNAME=IFACE`` (torch.distributed's Gloo backend, which takes a plain name).
In the frameworks' form (GPUs in local-rank order) it also exports, under mpirun,
torch.distributed's ``env://`` names from OpenMPI's
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``): with ``MASTER_ADDR``/``MASTER_PORT`` set, a PyTorch or
DeepSpeed program then rendezvous at the planned master instead of guessing one (DeepSpeed's own
MPI discovery takes the first address ``hostname -I`` prints on rank 0, which can be a bridge's).
When every host gets the same settings the table is keyed by local rank alone; otherwise by
short host name and local rank.

Every value written into the script is checked here against a strict pattern (names from the
facts were checked when parsed; this is the last line): nothing a node sent goes into shell text
unchecked.
"""

from __future__ import annotations

import re

from provision import __version__
from provision.errors import UnsafeValueError
from provision.plans.nics import NicPlan, RankNic
from provision.plans.rankfile import RankPlan

WRAPPER_NAME = "provision-rank"  # $0 of the wrapper when given inline (sh -c TEXT provision-rank ...)
_SAFE = re.compile(r"^[A-Za-z0-9_.:=,-]{1,128}\Z")
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}\Z")
LOCAL_RANK = "${OMPI_COMM_WORLD_LOCAL_RANK:-${LOCAL_RANK:-${HOROVOD_LOCAL_RANK:-${SLURM_LOCALID:-}}}}"


def checked_value(value: str) -> str:
    """``value`` when it is safe in the wrapper's or an env file's text; else :class:`UnsafeValueError`."""
    if not _SAFE.match(value):
        raise UnsafeValueError(f"{value[:40]!r} cannot go into the per-rank wrapper")
    return value


def rank_settings(rank: RankNic, visible: str | None = None) -> list[tuple[str, str]]:
    """The variables one rank gets, in order; ``visible``: its ``CUDA_VISIBLE_DEVICES`` when not
    its GPU alone (see :func:`host_devices`)."""
    settings = []
    if rank.gpu is not None:
        settings += [("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), ("CUDA_VISIBLE_DEVICES", visible or str(rank.gpu))]
    if rank.hca() is not None:
        settings += [("UCX_NET_DEVICES", rank.hca()), ("NCCL_IB_HCA", f"={rank.hca()}")]
    if rank.gid_index is not None:
        settings += [("NCCL_IB_GID_INDEX", str(rank.gid_index)), ("UCX_IB_GID_INDEX", str(rank.gid_index))]
    return settings


def job_settings(nics: NicPlan) -> list[tuple[str, str]]:
    """The variables every rank gets."""
    if not nics.interface:
        return []
    return [("NCCL_SOCKET_IFNAME", f"={nics.interface}"), ("GLOO_SOCKET_IFNAME", nics.interface)]


# torch.distributed's env:// names from OpenMPI's, under mpirun only (torchrun sets them itself);
# in the frameworks' wrapper only, where device LOCAL_RANK is the rank's GPU.
ENV_NAMES_FROM_MPI = (
    'if [ -n "${OMPI_COMM_WORLD_RANK:-}" ]; then export RANK="$OMPI_COMM_WORLD_RANK" '
    'WORLD_SIZE="$OMPI_COMM_WORLD_SIZE" LOCAL_RANK="$OMPI_COMM_WORLD_LOCAL_RANK"; fi'
)


def _exports(settings: list[tuple[str, str]]) -> str:
    return "export " + " ".join(f"{name}={checked_value(value)}" for name, value in settings) if settings else ":"


def _short(plan: RankPlan, host: str) -> str:
    facts = next(f for f in plan.facts if f.host == host)
    name = (facts.hostname or facts.host).split(".")[0]
    if not _HOST.match(name):
        raise UnsafeValueError(f"host name {name[:40]!r} cannot go into the per-rank wrapper")
    return name


def host_devices(ranks: list[RankNic]) -> str | None:
    """One host's GPUs in local-rank order (``3,2,1,0``), so that a program picking
    ``cuda:LOCAL_RANK`` (DeepSpeed, Horovod's ``set_device(hvd.local_rank())``, torchrun scripts)
    gets its planned GPU; None when some rank has no GPU or two share one (then each rank sees
    its own alone)."""
    gpus = [r.gpu for r in ranks]
    if not gpus or None in gpus or len(set(gpus)) != len(gpus):
        return None
    return ",".join(str(gpu) for gpu in gpus)


def wrapper_script(plan: RankPlan, nics: NicPlan, *, by_local_rank: bool = False) -> str:
    """The wrapper's text (see the module docstring); run as ``sh FILE PROGRAM ARGS...``.

    By default each rank sees its one GPU (``CUDA_VISIBLE_DEVICES=3``: device 0 to the program,
    as a plain mpirun program or DDL expects). ``by_local_rank``: each sees its host's GPUs in
    local-rank order (:func:`host_devices`), for frameworks that pick ``cuda:LOCAL_RANK``."""
    hosts = [h.host for h in sorted(plan.hosts, key=lambda h: h.index)]
    tables = {}
    for host in hosts:
        ranks = nics.of_host(host)
        visible = host_devices(ranks) if by_local_rank else None
        tables[host] = [_exports(rank_settings(r, visible)) for r in ranks]
    same = len({tuple(t) for t in tables.values()}) == 1
    devices = (
        "the host's GPUs in local-rank order: the program picks cuda:LOCAL_RANK"
        if by_local_rank
        else "its GPU alone: cuda:0 to the program"
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
        _exports(job_settings(nics)),
    ]
    if by_local_rank:  # a rank seeing its GPU alone must not be told LOCAL_RANK=3 (it has no device 3)
        lines.append(ENV_NAMES_FROM_MPI)
    if same:
        key = '"$r"'
        cases = [(str(i), line) for i, line in enumerate(tables[hosts[0]])]
    else:
        lines += ["h=; read -r h </proc/sys/kernel/hostname 2>/dev/null || h=$(hostname)", 'h="${h%%.*}"']
        key = '"$h/$r"'
        cases = [(f"{_short(plan, host)}/{i}", line) for host in hosts for i, line in enumerate(tables[host])]
    lines.append(f"case {key} in")
    lines += [f"{label}) {line} ;;" for label, line in cases]
    where = "" if same else " on $h"
    lines.append(f'*) echo "{WRAPPER_NAME}: local rank $r is not in the plan for {plan.dims}{where}" >&2; exit 2 ;;')
    lines += ["esac", 'exec "$@"', ""]
    return "\n".join(lines)


def inline_argv(script: str, command: list[str]) -> list[str]:
    """``sh -c SCRIPT provision-rank COMMAND...``: the wrapper travels with mpirun's command line,
    so it needs no copy on the other hosts (mpirun passes each argument whole)."""
    return ["sh", "-c", script, WRAPPER_NAME, *command]
