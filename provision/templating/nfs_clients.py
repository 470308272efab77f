"""Who the NFS server exports to by default: the addresses the controller vouches for.

The export list is cluster-wide (one node's list decides who reads every dataset), so it is made
only of what the inventory gives and the controller verified, never of what a node says about
itself: for each inventory host, the address the controller's own SSH connection reached it at,
its host key verified on that connection (``verified_addresses`` in hostvars; see
:mod:`provision.engine.membership`). A node printing an outside address (``203.0.113.9``) in its
``hostname -I`` does not get the datasets exported there.

What a node reports is still used, as a check only: a host that does not report the address the
controller reached it at sits behind NAT, a jump host or a container network, where that address
is not the one its NFS requests come from; :func:`unreported_addresses` says so, once, naming the
hosts and ``nfs_clients`` (the inventory's explicit list, which always wins).

    >>> node = {"facts": {"addresses": ["10.0.0.1", "203.0.113.9"]}, "verified_addresses": ["10.0.0.1"]}
    >>> cluster_addresses({"n1": node})
    ['10.0.0.1']
"""

from __future__ import annotations

import ipaddress
from typing import Any

from provision.errors import TemplateError


def _verified(values: Any) -> list[str]:
    addresses = values.get("verified_addresses") if isinstance(values, dict) else None
    return [a for a in addresses if isinstance(a, str) and a] if isinstance(addresses, list) else []


def _unknown(hosts: list[str], setting: str) -> TemplateError:
    names = ", ".join(hosts)
    return TemplateError(
        f"no address known of {names} (not reached in this run nor in an earlier one): "
        f"run setup-cluster once with {names} reachable and in --limit, or set {setting}"
    )


def cluster_addresses(hostvars: Any) -> list:
    """``hostvars | cluster_addresses``: every inventory host's verified address (live, or cached
    from the run that last reached it), for lists that must name the whole cluster (NFS clients).
    A host with none known is an error naming it and what to run: the list never shrinks to the
    hosts of this run."""
    hostvars = hostvars or {}
    missing = sorted(h for h, v in hostvars.items() if not _verified(v))
    if missing:
        raise _unknown(missing, "nfs_clients")
    return list(dict.fromkeys(a for h in sorted(hostvars) for a in _verified(hostvars[h])))


def verified_address(hostvars: Any, host: Any) -> str:
    """``hostvars | verified_address(nfs_server)``: the address the controller reached ``host`` at
    (what the NFS clients' fstab lines mount from by default), never one it reports itself; an
    error naming it when none is known."""
    address = next(iter(_verified((hostvars or {}).get(str(host)))), None)
    if address is None:
        raise _unknown([str(host)], "nfs_server_address")
    return address


def _reported(values: dict) -> set[str]:
    """The addresses a node reports for itself, in one spelling (``10.0.0.1``, ``fe80::1``)."""
    out = set()
    for address in (values.get("facts") or {}).get("addresses") or []:
        try:
            out.add(str(ipaddress.ip_address(str(address).split("%", 1)[0])))
        except ValueError:
            continue
    return out


def unreported_addresses(hostvars: Any) -> str | None:
    """One warning naming each host reached in this run at an address it does not report itself
    (NAT, a jump host, a container network: its NFS requests come from another address than the
    one exported to by default), or None. Cached hosts were checked when they were reached; a
    host reached by name through a jump host cannot be compared (the last hop resolved it)."""
    unreported = []
    for host, values in sorted((hostvars or {}).items()):
        if not isinstance(values, dict) or values.get("cached") or values.get("unknown"):
            continue
        for address in _verified(values):
            try:
                plain = str(ipaddress.ip_address(address))
            except ValueError:
                continue
            if plain not in _reported(values):
                unreported.append(f"{host} at {plain}")
    if not unreported:
        return None
    shown = ", ".join(unreported[:8]) + (f" and {len(unreported) - 8} more" if len(unreported) > 8 else "")
    who = "that host does" if len(unreported) == 1 else "those hosts do"
    return (
        f"NFS exports: the controller reached {shown}, an address {who} not report (NAT, a jump host or a container network?); "
        "the default export list names it: "
        "set nfs_clients in the inventory to the addresses or networks the clients mount from"
    )
