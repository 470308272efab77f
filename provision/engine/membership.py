"""Who is in the cluster, and what is known of the hosts outside this run.

Cluster-wide files (every node's ``ssh_known_hosts`` and ``authorized_keys``, the NFS export
list) are built from the inventory, never only from the hosts that answered this run. What a
host told the controller in its last run (names, addresses, host keys, its registered results
such as the users' public keys) is kept in a per-inventory cache folder on the controller,
``<inventory folder>/.provision-cache/<inventory name>/<host>.json``, written atomically after
every run. A host outside ``--limit`` or unreachable now is filled in from there; a host nothing
is known of is marked ``unknown`` (its lines are kept, never dropped, and what needs its
addresses refuses, naming it).

``verified_addresses``: where the controller itself reached a host (the peer address of its SSH
connection, the host key verified), kept with the record; the NFS export list is made of these,
never of the addresses a node reports (see :mod:`provision.templating.nfs_clients`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from provision.errors import UnsafeFileError
from provision.files import StagedFiles, private_dir, read_regular
from provision.inventory.model import HOST_NAME, Inventory

CACHE_FOLDER = ".provision-cache"
_HOSTINFO_FIELDS = ("hostname", "fqdn", "short", "addresses", "host_keys", "home")


def cache_folder(inventory: Inventory) -> Path | None:
    """The cache folder of ``inventory`` (None for an ad-hoc inventory: nothing is kept)."""
    if inventory.path is None:
        return None
    return inventory.path.parent / CACHE_FOLDER / inventory.path.stem


class HostCache:
    """``<folder>/<host>.json``: each host's hostinfo and registered results from its last run."""

    def __init__(self, folder: Path | None):
        self.folder = folder

    def load(self, host: str) -> dict | None:
        """The cached record of ``host``, or None (never cached, or not a record this code wrote)."""
        if self.folder is None or not HOST_NAME.match(host):
            return None
        try:  # never through a link, never a FIFO: the inventory's folder may be shared
            data = json.loads(read_regular(self.folder / f"{host}.json"))
        except (OSError, ValueError, UnsafeFileError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("facts"), dict):
            return None
        return data

    def save(self, records: dict[str, dict]) -> None:
        """Write each host's record atomically, all with one sync (:class:`provision.files.StagedFiles`),
        in a private folder (0700, yours, never a link: it names every node), files 0600."""
        records = {host: record for host, record in records.items() if HOST_NAME.match(host)}
        if self.folder is None or not records:
            return
        with StagedFiles() as staged:
            folder = staged.keep_open(private_dir(self.folder, mode=0o700))
            for host, record in records.items():
                staged.add(folder, f"{host}.json", (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())


def _strip_items(value: Any) -> Any:
    """A registered value without its loop ``item`` copies (variables, never needed later)."""
    if isinstance(value, dict):
        return {k: _strip_items(v) for k, v in value.items() if k != "item"}
    if isinstance(value, list):
        return [_strip_items(v) for v in value]
    return value


def record_of(live: dict, old: dict | None, kept: set[str]) -> dict:
    """A host's new cache record: its live hostinfo and the registered values named in
    ``kept`` from this run, over what the old record held (a value this run did not register,
    e.g. skipped by --tags, stays as it was)."""
    facts = {k: live["facts"][k] for k in _HOSTINFO_FIELDS if k in live.get("facts", {})}
    registered = dict((old or {}).get("registered") or {})
    registered.update({name: _strip_items(live[name]) for name in kept if name in live})
    return {
        "facts": facts,
        "registered": registered,
        "inventory_address": live.get("inventory_address"),
        "inventory_port": live.get("inventory_port"),
        "verified_addresses": list(live.get("verified_addresses") or []),
    }


def cached_hostvars(name: str, record: dict | None, address: str | None, port: int | None) -> dict:
    """The hostvars of a host outside this run (or unreachable): its cached record marked
    ``cached``, or ``unknown`` when nothing is known of it. The addresses the controller verified
    then are kept only while the inventory still reaches the host the same way (a changed
    ``address`` or ``port`` makes them stale) and only as the list of addresses this code wrote."""
    base = {"inventory_hostname": name, "inventory_address": address, "inventory_port": port}
    if record is None:
        return {**base, "facts": {}, "unknown": True}
    verified = record.get("verified_addresses")
    same_way = (record.get("inventory_address"), record.get("inventory_port")) == (address, port)
    if not (same_way and isinstance(verified, list) and all(isinstance(a, str) and a for a in verified)):
        verified = []
    return {
        **record.get("registered", {}),
        **base,
        "facts": dict(record["facts"]),
        "cached": True,
        "verified_addresses": verified,
    }


def verified_addresses(run: Any) -> list[str]:
    """Where the controller reached ``run``'s host on this run's verified connection (see
    ``Session.connected_address``); for ``localhost`` (no SSH: the controller itself) its own
    addresses, which the controller read itself. Nothing a remote node reports."""
    if run.connected_address:
        return [run.connected_address]
    if run.host.is_local:
        return [a for a in run.identity().get("addresses") or [] if isinstance(a, str)]
    return []


def verified_key_problem(name: str, facts: dict, verified: str | None) -> str | None:
    """Why ``name``'s reported host keys cannot be believed, or None: the key the controller
    verified on this very connection must be among them (a node reporting other keys could
    pose as another node in every node's known_hosts)."""
    if verified is None:  # localhost: no SSH, nothing verified
        return None
    keys = [" ".join(k.split()[:2]) for k in facts.get("host_keys") or []]
    if verified in keys:
        return None
    return (
        f"{name}: the host keys it reports ({len(keys)}) do not include {verified.split()[0]} key the controller "
        "verified on this connection: its names and keys are not trusted"
    )


def new_hosts_problem(inventory: Inventory, run_hosts: list[str], cache: HostCache, command: str) -> str | None:
    """Why a ``--limit`` run would leave SSH trust one-sided, or None: a host in the run that
    was never set up from this controller must also be learned by the hosts outside the run.
    The message says what to run instead."""
    outside = [h for h in inventory.hosts if h not in run_hosts]
    new = [h for h in run_hosts if cache.load(h) is None]
    if not outside or not new:
        return None
    return (
        f"--limit: {', '.join(new)} {'is' if len(new) == 1 else 'are'} new to this cluster (no state in "
        f"{cache.folder or 'the cache'}) and {', '.join(outside)} outside this run would not trust "
        f"{'it' if len(new) == 1 else 'them'}: run `{command}` without --limit (or add --limit {','.join(outside)})"
    )


def _live(run: Any) -> bool:
    """Whether a host answered this run and may be believed (its host keys included the verified one)."""
    return bool(run.identity()) and not run.untrusted


def fill_hostvars(hostvars: dict, inventory: Inventory, runs: dict[str, Any], known: dict[str, dict | None]) -> None:
    """``hostvars`` of every inventory host: live for the hosts that answered this run (over
    their cached record), cached (or ``unknown``) for the others, so cluster-wide files never
    shrink to the hosts of this run."""
    for name, host in inventory.hosts.items():
        run = runs.get(name)
        if run is None or not _live(run):
            hostvars[name] = cached_hostvars(name, known.get(name), host.address, host.port)
    for name, run in runs.items():
        if not _live(run):
            if name not in hostvars:  # an ad-hoc host outside the inventory
                hostvars[name] = cached_hostvars(name, None, run.host.address, run.host.port)
            continue
        hostvars[name] = {
            **((known.get(name) or {}).get("registered") or {}),
            **run.registered,
            "facts": run.identity(),
            "inventory_hostname": name,
            "inventory_address": run.host.address,
            "inventory_port": run.host.port,
            "verified_addresses": verified_addresses(run),
        }


def save_records(
    cache: HostCache, inventory: Inventory, runs: dict[str, Any], hostvars: dict, known: dict[str, dict | None], kept: set[str]
) -> None:
    """Keep each inventory host's record for the runs that leave it out: only hosts that
    answered, were believed and did not fail (a failed host's claims, e.g. a name clash, are not
    kept); ``kept``: the registered results worth keeping (never a no_log task's)."""
    cache.save(
        {
            name: record_of(hostvars[name], known.get(name), kept)
            for name, run in runs.items()
            if name in inventory.hosts and _live(run) and not run.failed
        }
    )
