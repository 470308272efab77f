"""Warnings for what the user adds with ``launch -x NAME[=VALUE]``: values NCCL would read otherwise than meant.

One line each, naming the hosts and the value, by NCCL's own parsing (src/misc/utils.cc
``parseStringList``/``matchIfList``: a list split at ``,``, each entry ``name[:port]``, a leading
``^`` excludes, a leading ``=`` matches whole names, otherwise each name is a prefix):

- ``NCCL_SOCKET_IFNAME`` without ``=`` whose prefix matches other interfaces (``eth`` matching
  ``eth0`` and ``eth1``), or none, on some host;
- ``NCCL_IB_HCA`` naming a device or port that is absent or not ACTIVE on some host (NCCL skips
  ports that are not ACTIVE: src/transport/net_ib/init.cc), or a prefix that matches more;
- a per-rank NCCL value (``$OMPI_COMM_WORLD_LOCAL_RANK``...): mpirun passes ``-x`` values as they
  are, the same to every rank, and NCCL_IB_HCA must be the same on every rank of a host
  (NVIDIA/nccl#1478);
- a variable the plan sets: with a value the user's wins (the wrapper leaves it alone), said with
  what the plan would have set; without one the wrapper's wins, said too;
- an interface entry with ``:`` in ``NCCL_SOCKET_IFNAME``: NCCL reads what follows as a port, so an
  alias label (``eth0:1``) is never matched by name.

Refused (:func:`check_gpu_exports`, one line naming the host and what each rank would get): a
``CUDA_VISIBLE_DEVICES`` that would put some rank on another GPU than planned, and a
``CUDA_DEVICE_ORDER`` other than ``PCI_BUS_ID`` (the GPUs renumbered).

Example::

    >>> _entries("^=mlx5_0:1,mlx5_1")
    (True, True, [('mlx5_0', 1), ('mlx5_1', None)])
"""

from __future__ import annotations

from provision.errors import PlanError
from provision.facts.model import HostFacts
from provision.launch.mpirun import check_export
from provision.launch.wrapper import host_settings, job_settings
from provision.plans.nics import NicPlan
from provision.plans.rankfile import RankPlan, some_names
from provision.text import shown_value

PER_RANK_WORDS = ("$", "`")


def export_values(export: list[str]) -> dict[str, str]:
    """{NAME: VALUE} of the ``-x NAME=VALUE`` among ``export`` (a ``-x NAME`` passes the value here)."""
    return dict(check_export(item).split("=", 1) for item in export if "=" in item)


def _entries(value: str) -> tuple[bool, bool, list[tuple[str, int | None]]]:
    """(exclude, exact, [(name, port or None)]) as NCCL parses the list."""
    exclude = value.startswith("^")
    value = value[1:] if exclude else value
    exact = value.startswith("=")
    value = value[1:] if exact else value
    entries = []
    for item in value.split(","):
        name, _, rest = item.partition(":")
        port = rest.split(":", 1)[0]
        if name:
            entries.append((name, int(port) if port.isdigit() else None))
    return exclude, exact, entries


def _matches(names: list[str], name: str, exact: bool) -> list[str]:
    return [n for n in names if (n == name if exact else n.startswith(name))]


def _socket_warnings(value: str, facts_list: list[HostFacts]) -> list[str]:
    exclude, exact, entries = _entries(value)
    # src/misc/utils.cc parseStringList: "name:port", so "eth0:1" is interface eth0, port 1
    ported = [item for item in value.lstrip("^=").split(",") if ":" in item]
    if ported:
        return [
            f"-x NCCL_SOCKET_IFNAME={value}: NCCL reads what follows ':' as a port, so {ported[0]} is interface "
            f"{ported[0].split(':')[0]}: an alias label ({ported[0]}) is never matched by name (give its device)"
        ]
    if exclude:
        return []
    found: dict[str, list[str]] = {}
    for facts in facts_list:
        if not facts.interfaces:
            continue
        names = sorted(i.name for i in facts.interfaces)
        for name, _ in entries:
            matched = _matches(names, name, exact)
            if not matched:
                found.setdefault(f"{name} matches no interface", []).append(facts.host)
            elif not exact and matched != [name]:
                hint = f"={matched[0]}" if len(matched) > 1 else f"={name}"
                what = f"{name} is a prefix: it matches {', '.join(matched[:6])} (NCCL_SOCKET_IFNAME={hint} for exactly one)"
                found.setdefault(what, []).append(facts.host)
    return [f"-x NCCL_SOCKET_IFNAME={value}: {what} on {some_names(hosts)}" for what, hosts in found.items()]


def _hca_warnings(value: str, facts_list: list[HostFacts]) -> list[str]:
    exclude, exact, entries = _entries(value)
    if exclude:
        return []
    found: dict[str, list[str]] = {}
    for facts in facts_list:
        if not facts.rdma:
            continue
        devices = {d.name: d for d in facts.rdma}
        for name, port in entries:
            matched = _matches(sorted(devices), name, exact)
            if not matched:
                found.setdefault(f"{name} is absent", []).append(facts.host)
                continue
            if not exact and matched != [name]:
                found.setdefault(f"{name} is a prefix: it matches {', '.join(matched[:6])} (={name} for exactly it)", []).append(
                    facts.host
                )
            for device in (devices[m] for m in matched):
                ports = [p for p in device.ports if port is None or p.number == port]
                if port is not None and not ports:
                    found.setdefault(f"{device.name}:{port} is absent", []).append(facts.host)
                for p in ports:
                    if not p.active:
                        found.setdefault(f"{device.name}:{p.number} is {p.state}", []).append(facts.host)
    return [f"-x NCCL_IB_HCA={value}: {what} on {some_names(hosts)}" for what, hosts in found.items()]


def _planned(plan: RankPlan, nics: NicPlan, own_gpu_only: bool, skip: frozenset[str]) -> dict[str, dict[str, set[str]]]:
    """{variable: {host: the values the plan gives its ranks}} (``skip``: what the user sets)."""
    planned: dict[str, dict[str, set[str]]] = {}
    for host_plan in plan.hosts:
        host = host_plan.host
        for settings in host_settings(nics, host, own_gpu_only=own_gpu_only, skip=skip):
            for name, value in [*job_settings(nics), *settings]:
                planned.setdefault(name, {}).setdefault(host, set()).add(value)
    return planned


def _device_order_error(order: str) -> str:
    how = "fastest first" if order == "FASTEST_FIRST" else f"by {shown_value(order[:40])}"
    return (
        f"-x CUDA_DEVICE_ORDER={order}: CUDA would number the GPUs {how}, not by PCI bus as nvidia-smi and the plan do, "
        "so device LOCAL_RANK need not be the rank's planned GPU; drop it (the wrapper sets PCI_BUS_ID)"
    )


def check_gpu_exports(nics: NicPlan, export: list[str], *, own_gpu_only: bool = False) -> None:
    """:class:`PlanError`, one line naming the host and what each rank would get, when a user's
    ``-x CUDA_VISIBLE_DEVICES=V`` would put some rank on another GPU than planned (a program picks
    item ``LOCAL_RANK`` of V; item 0 with ``own_gpu_only``), or ``-x CUDA_DEVICE_ORDER=V`` other
    than ``PCI_BUS_ID`` would renumber the GPUs. An empty V (no GPU for any rank: a CPU-only run)
    and a V that gives every rank its planned GPU are the user's to set.

    >>> check_gpu_exports(NicPlan((), None, ()), ["CUDA_VISIBLE_DEVICES="])
    """
    values = export_values(list(export))
    with_gpu = [rank for rank in nics.ranks if rank.gpu is not None]
    order = values.get("CUDA_DEVICE_ORDER")
    if order is not None and order != "PCI_BUS_ID" and with_gpu:
        raise PlanError(_device_order_error(order))
    value = values.get("CUDA_VISIBLE_DEVICES")
    if not value or not with_gpu:
        return
    items = [item.strip() for item in value.split(",")]
    wrong: list[tuple[str, str]] = []
    for host in dict.fromkeys(rank.host for rank in with_gpu):
        ranks = nics.of_host(host)
        picks = [items[k] if k < len(items) else None for k in (0 if own_gpu_only else r.local_rank for r in ranks)]
        if any(pick != (None if r.gpu is None else str(r.gpu)) for r, pick in zip(ranks, picks, strict=True)):
            shown = ", ".join(
                f"{r.local_rank} {'no GPU' if p is None else 'GPU ' + p[:40]} (planned {r.gpu})"
                for r, p in list(zip(ranks, picks, strict=True))[:8]
            )
            wrong.append((host, shown))
    if wrong:
        host, shown = wrong[0]
        device = "device 0" if own_gpu_only else "device LOCAL_RANK"
        more = f" (and on {some_names([h for h, _ in wrong[1:]])})" if len(wrong) > 1 else ""
        raise PlanError(
            f"-x CUDA_VISIBLE_DEVICES={value}: every rank of {host} would see {value}, so by {device} local rank {shown}{more}; "
            "drop it: each rank's CUDA_VISIBLE_DEVICES comes from the plan (-x CUDA_VISIBLE_DEVICES= for no GPU at all)"
        )


def export_warnings(plan: RankPlan, nics: NicPlan, export: list[str], *, own_gpu_only: bool = False) -> list[str]:
    """One line per thing NCCL would read otherwise than meant in ``export`` (``-x`` items)."""
    facts_list = list(plan.facts)
    planned = _planned(plan, nics, own_gpu_only, frozenset(export_values(export)))
    warnings = []
    for item in export:
        name, given, value = item.partition("=")
        if given and name == "CUDA_VISIBLE_DEVICES":
            if not value and any(rank.gpu is not None for rank in nics.ranks):
                warnings.append("-x CUDA_VISIBLE_DEVICES=: every rank sees no GPU (a CPU-only run)")
            continue  # any other value either gives each rank its planned GPU or is refused (check_gpu_exports)
        if given and name == "NCCL_SOCKET_IFNAME":
            warnings += _socket_warnings(value, facts_list)
        if given and name == "NCCL_IB_HCA":
            warnings += _hca_warnings(value, facts_list)
        if given and (name.startswith("NCCL_") or name in planned) and any(word in value for word in PER_RANK_WORDS):
            warnings.append(
                f"-x {item}: mpirun passes it as it is, the same to every rank on every host (nothing expands it): "
                "a per-rank NCCL setting cannot be made so, and NCCL_IB_HCA must be the same on every rank of a host"
            )
        if name not in planned:
            continue
        hosts = planned[name]
        shown = "; ".join(f"{host}: {' '.join(sorted(values)[:3])}" for host, values in list(hosts.items())[:3])
        if given and any(values != {value} for values in hosts.values()):
            warnings.append(
                f"-x {item}: replaces the plan's {name} on {some_names(list(hosts))} ({shown}); every rank gets {value}"
            )
        elif not given:
            warnings.append(f"-x {name}: the wrapper sets {name} itself on {some_names(list(hosts))} ({shown}); its value wins")
    return warnings
