"""The per-rank wrapper: a POSIX sh script that sets each rank's GPU and NIC, then runs the program.

It reads the rank's local rank from what the launcher sets (OpenMPI's
``OMPI_COMM_WORLD_LOCAL_RANK``, torchrun's and DeepSpeed's ``LOCAL_RANK``, Horovod's
``HOROVOD_LOCAL_RANK``, Slurm's ``SLURM_LOCALID``) and exports what each stack reads, by NCCL's
own rules (docs/how-to/probe-and-launch.md, "What launch sets"; each rule a case in
tests/fixtures/nccl_rules.json, citing its source or saying it is our choice):

- per rank: ``CUDA_VISIBLE_DEVICES`` with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (so an index means
  the GPU nvidia-smi and the facts number so): every GPU of the host, the rank's own first
  (``3,0,1,2``: device 0 is the planned GPU, and NCCL can still open the other ranks' CUDA IPC
  handles for NVLink/P2P: NVIDIA/nccl#129, #1066), or for frameworks that pick ``cuda:LOCAL_RANK``
  the host's GPUs in local-rank order; ``UCX_NET_DEVICES=mlx5_0:1`` (MPI's own traffic, which UCX
  lets each process choose) and on RoCE ``UCX_IB_GID_INDEX``;
- per host, the same for every rank of it: ``NCCL_IB_HCA==mlx5_0:1,mlx5_1:1`` (the host's rails,
  :mod:`provision.plans.rails`: NCCL picks each GPU's nearest itself) and on RoCE
  ``NCCL_IB_GID_INDEX``;
- for the whole job: ``NCCL_SOCKET_IFNAME==IFACE`` (exact: never ``eth`` matching ``eth1``)
  with ``GLOO_SOCKET_IFNAME=IFACE`` (Gloo takes a plain name), ``NCCL_IB_DISABLE=1`` when
  ``--common-rails`` found no rail common to every host.

In the frameworks' form it also exports, under mpirun, torch.distributed's ``env://`` names
from OpenMPI's (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``). When every host gets the same settings
the table is keyed by local rank alone; otherwise by host and local rank, the host being its
inventory name, told by the launcher, never what the node calls itself: mpirun's
``OMPI_COMM_WORLD_RANK`` (the rank file fixes each rank's host) or ``PROVISION_HOST`` (set on
each torchrun line). Variables the user sets with ``-x NAME=VALUE`` are left to the user's value.

Every value written into the script is checked here against a strict pattern (names from the
facts were checked when parsed; this is the last line): nothing a node sent goes into shell text
unchecked.
"""

from __future__ import annotations

import re

from provision import __version__
from provision.errors import UnsafeValueError
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


def own_first(gpu: int, host_gpus: tuple[int, ...]) -> str:
    """``3,0,1,2``: every GPU of the host, ``gpu`` first (device 0 to the program)."""
    return ",".join(str(g) for g in [gpu, *(g for g in host_gpus if g != gpu)])


def rank_settings(rank: RankNic, visible: str | None = None, host: HostRails | None = None) -> list[tuple[str, str]]:
    """The variables one rank gets, in order; ``visible``: its ``CUDA_VISIBLE_DEVICES`` (default:
    its host's GPUs, its own first); ``host``: its host's rails (``NCCL_IB_HCA``, one per host)."""
    settings = []
    if rank.gpu is not None:
        devices = visible or own_first(rank.gpu, host.gpus if host else ())
        settings += [("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), ("CUDA_VISIBLE_DEVICES", devices)]
    if rank.hca() is not None:
        settings.append(("UCX_NET_DEVICES", rank.hca()))
    if host is not None and host.hca() is not None:
        settings.append(("NCCL_IB_HCA", host.hca()))
        if host.gid_index is not None:
            settings.append(("NCCL_IB_GID_INDEX", str(host.gid_index)))
    if rank.gid_index is not None:
        settings.append(("UCX_IB_GID_INDEX", str(rank.gid_index)))
    return settings


def job_settings(nics: NicPlan) -> list[tuple[str, str]]:
    """The variables every rank gets."""
    settings = [("NCCL_IB_DISABLE", "1")] if nics.ib_disable else []
    if nics.interface:
        settings += [("NCCL_SOCKET_IFNAME", f"={nics.interface}"), ("GLOO_SOCKET_IFNAME", nics.interface)]
    return settings


# torch.distributed's env:// names from OpenMPI's, under mpirun only (torchrun sets them itself);
# in the frameworks' wrapper only, where device LOCAL_RANK is the rank's GPU.
ENV_NAMES_FROM_MPI = (
    'if [ -n "${OMPI_COMM_WORLD_RANK:-}" ]; then export RANK="$OMPI_COMM_WORLD_RANK" '
    'WORLD_SIZE="$OMPI_COMM_WORLD_SIZE" LOCAL_RANK="$OMPI_COMM_WORLD_LOCAL_RANK"; fi'
)


def _exports(settings: list[tuple[str, str]], skip: frozenset[str] = frozenset()) -> str:
    kept = [(name, value) for name, value in settings if name not in skip]
    return "export " + " ".join(f"{name}={checked_value(value)}" for name, value in kept) if kept else ":"


def host_label(host: str) -> str:
    """``host`` (an inventory name) when it is safe as a ``case`` label; else :class:`UnsafeValueError`."""
    if not _HOST.fullmatch(host):
        raise UnsafeValueError(f"host name {shown_value(host[:40])} cannot go into the per-rank wrapper")
    return host


def host_devices(ranks: list[RankNic]) -> str | None:
    """One host's GPUs in local-rank order (``3,2,1,0``), so that a program picking
    ``cuda:LOCAL_RANK`` (DeepSpeed, Horovod's ``set_device(hvd.local_rank())``, torchrun scripts)
    gets its planned GPU; None when some rank has no GPU or two share one (then each rank sees
    its host's GPUs, its own first: :func:`own_first`)."""
    gpus = [r.gpu for r in ranks]
    if not gpus or None in gpus or len(set(gpus)) != len(gpus):
        return None
    return ",".join(str(gpu) for gpu in gpus)


def wrapper_script(plan: RankPlan, nics: NicPlan, *, by_local_rank: bool = False, skip: frozenset[str] = frozenset()) -> str:
    """The wrapper's text (see the module docstring); run as ``sh FILE PROGRAM ARGS...``.

    By default each rank sees its host's GPUs, its own first (``CUDA_VISIBLE_DEVICES=3,0,1,2``:
    device 0 to the program, as a plain mpirun program or DDL expects). ``by_local_rank``: in
    local-rank order (:func:`host_devices`), for frameworks that pick ``cuda:LOCAL_RANK``.
    ``skip``: variables the user sets (``-x NAME=VALUE``), not exported here."""
    hosts = [h.host for h in sorted(plan.hosts, key=lambda h: h.index)]
    tables = {}
    for host in hosts:
        ranks = nics.of_host(host)
        visible = host_devices(ranks) if by_local_rank else None
        tables[host] = [_exports(rank_settings(r, visible, nics.hosts.get(host)), skip) for r in ranks]
    same = len({tuple(t) for t in tables.values()}) == 1
    devices = (
        "the host's GPUs in local-rank order: the program picks cuda:LOCAL_RANK"
        if by_local_rank
        else "the host's GPUs, the rank's own first: cuda:0 to the program"
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
    ]
    if by_local_rank:  # own-first order: device LOCAL_RANK is not the rank's GPU (its own is device 0)
        lines.append(ENV_NAMES_FROM_MPI)
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
    lines += ["esac", 'exec "$@"', ""]
    return "\n".join(lines)


def inline_argv(script: str, command: list[str]) -> list[str]:
    """``sh -c SCRIPT provision-rank COMMAND...``: the wrapper travels with mpirun's command line,
    so it needs no copy on the other hosts (mpirun passes each argument whole)."""
    return ["sh", "-c", script, WRAPPER_NAME, *command]
