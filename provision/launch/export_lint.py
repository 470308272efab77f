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
  what the plan would have set; without one the wrapper's wins, said too.

Example::

    >>> _entries("^=mlx5_0:1,mlx5_1")
    (True, True, [('mlx5_0', 1), ('mlx5_1', None)])
"""

from __future__ import annotations

from provision.facts.model import HostFacts
from provision.launch.mpirun import check_export
from provision.launch.wrapper import job_settings, rank_settings
from provision.plans.nics import NicPlan
from provision.plans.rankfile import RankPlan, some_names

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


def _planned(plan: RankPlan, nics: NicPlan) -> dict[str, dict[str, set[str]]]:
    """{variable: {host: the values the plan gives its ranks}}."""
    planned: dict[str, dict[str, set[str]]] = {}
    for host_plan in plan.hosts:
        host = host_plan.host
        for rank in nics.of_host(host):
            for name, value in [*job_settings(nics), *rank_settings(rank, None, nics.hosts.get(host))]:
                planned.setdefault(name, {}).setdefault(host, set()).add(value)
    return planned


def export_warnings(plan: RankPlan, nics: NicPlan, export: list[str]) -> list[str]:
    """One line per thing NCCL would read otherwise than meant in ``export`` (``-x`` items)."""
    facts_list = list(plan.facts)
    planned = _planned(plan, nics)
    warnings = []
    for item in export:
        name, given, value = item.partition("=")
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
