"""The filters playbooks use to build cluster-wide values from every host's state: registered
results, known_hosts entries and per-node keys, the cluster's addresses, who writes a shared /home,
the Slurm files (:mod:`provision.templating.slurm_role`), cluster users present or gone. Pure
functions of ``hostvars`` and variables; what a node reported is checked before it is believed
(the NFS clients' addresses are never taken from it: :mod:`provision.templating.nfs_clients`)."""

from __future__ import annotations

import ipaddress
from typing import Any

from provision.errors import TemplateError
from provision.inventory.model import USER_NAME
from provision.templating.nfs_clients import cluster_addresses, verified_address
from provision.templating.slurm_role import slurm_files, slurm_node_check
from provision.text import shown_value


def registered(hostvars: Any, name: str) -> list:
    """``hostvars | registered('user_keys')``: every host's registered results of that name
    (loop results flattened, each with ``host`` added), hosts without it skipped."""
    out = []
    for host, values in sorted((hostvars or {}).items()):
        value = values.get(name) if isinstance(values, dict) else None
        if not isinstance(value, dict):
            continue
        for result in value.get("results", [value]):
            if isinstance(result, dict):
                out.append({**result, "host": host})
    return out


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def _host_names(host: str, values: dict) -> list[str]:
    """The names and addresses the controller itself vouches for ``host`` by, the only ones that
    go cluster-wide: its inventory name (first), the address the controller connected to
    (``[address]:port`` off port 22; its host key verified on that connection), and the names
    the node reports that its inventory name already gives: its host name, FQDN and short name
    when their first label is the inventory name's (``node02`` reporting
    ``node02.cluster.local``). Other names and addresses a node reports are its claims: never
    written (a node printing ``gitlab.example.com`` must not get its keys trusted under it)."""
    facts = values.get("facts") or {}
    address, port = values.get("inventory_address"), values.get("inventory_port")
    names = [host]
    if address:
        names.append(f"[{address}]:{port}" if port and port != 22 else address)
    label = None if _is_address(host) else host.split(".", 1)[0].lower()
    for claim in (facts.get("hostname"), facts.get("fqdn"), facts.get("short")):
        if isinstance(claim, str) and claim and claim.split(".", 1)[0].lower() == label:
            names.append(claim)
    return [n for n in dict.fromkeys(names) if n]


def _claims(values: dict) -> list[str]:
    """Every name and address a node reports for itself."""
    facts = values.get("facts") or {}
    reported = [facts.get("hostname"), facts.get("fqdn"), facts.get("short"), *(facts.get("addresses") or [])]
    return [c for c in reported if isinstance(c, str) and c]


def claim_problems(hostvars: dict) -> dict[str, str]:
    """{host: why} for each host whose identity conflicts with another's: a name or address it
    reports that is another host's own (its inventory name or short name, the address the
    controller reaches it at, its vouched-for names); the claimant alone is named (a compromised
    node must not pose as another in every node's known_hosts, nor stop the others). Two hosts
    the inventory itself gives one name or address (an inventory error) are both named."""
    owner: dict[str, str] = {}
    problems: dict[str, str] = {}
    for host, values in sorted(hostvars.items()):
        for name in _host_names(host, values if isinstance(values, dict) else {}):
            other = owner.setdefault(name.lower(), host)
            if other != host:
                message = f"hosts {other} and {host} both have the name or address {shown_value(name)}: fix it in the inventory"
                problems.setdefault(other, message)
                problems.setdefault(host, message)
        if not _is_address(host):
            owner.setdefault(host.split(".", 1)[0].lower(), host)
    for host, values in sorted(hostvars.items()):
        for claim in _claims(values if isinstance(values, dict) else {}):
            other = owner.get(claim.lower())
            if other is not None and other != host:
                problems.setdefault(
                    host,
                    f"host {host} reports the name or address {shown_value(claim)}, which is host {other}'s: not believed "
                    f"(fix the host name or addresses on {host}; the other hosts go on)",
                )
    return problems


def _check_claims(hostvars: dict, host: str | None = None) -> None:
    """Raise :class:`TemplateError` for ``host``'s conflicting claim (see :func:`claim_problems`);
    without ``host``, for any host's."""
    problems = claim_problems(hostvars)
    if host is None and problems:
        raise TemplateError(next(iter(problems.values())))
    if host in problems:
        raise TemplateError(problems[host])


def host_key_entries(hostvars: Any, host: Any = None) -> list:
    """``hostvars | host_key_entries(inventory_hostname)``: known_hosts entries for every
    inventory host: ``node``, the names the controller vouches for (see :func:`_host_names`) and
    its host keys (read over the verified connection, or cached from its last run); ``keys`` None
    when nothing is known of it (its present lines are kept). Rendered for a host whose reported
    names conflict with another's, an error naming it; the others get every host's entry, the
    claimant's under its vouched-for names only."""
    hostvars = hostvars or {}
    _check_claims(hostvars, str(host) if host else None)
    entries = []
    for name, values in sorted(hostvars.items()):
        keys = (values.get("facts") or {}).get("host_keys") or None
        entries.append({"node": name, "names": _host_names(name, values), "keys": list(keys) if keys else None})
    return entries


def node_keys(hostvars: Any, name: str, user: str) -> dict:
    """``hostvars | node_keys('user_keys', 'alice')``: {inventory host: [alice's public keys it
    registered under ``name``]} for every host; None for a host that registered none (unknown:
    its present lines are kept); ``"pending"`` for a host whose key pair this run makes and
    whose public key is not known yet (``--check`` only: the file will change, issue 34)."""
    out: dict[str, list | str | None] = {}
    for host in sorted(hostvars or {}):
        results = registered({host: hostvars[host]}, name)
        mine = [r for r in results if r.get("user") == user]
        keys = [r["public_key"] for r in mine if r.get("public_key")]
        # made in this run and not read (--check: a real run reads it once made, or fails there)
        made = any(r.get("changed") and not r.get("public_key") and not r.get("error") for r in mine)
        out[host] = keys or ("pending" if made else None)
    return out


# File systems one server (or cluster) serves to many nodes: the same source and inode on every
# node is the same folder. On local disks the same inode proves nothing (nodes cloned from one
# image share inode numbers), so a local /home is never taken as shared unless told.
NETWORK_FS = frozenset({"nfs", "nfs4", "lustre", "gpfs", "ceph", "beegfs", "glusterfs", "fuse", "fuseblk", "smb2", "cifs"})


def home_shared(homes: list) -> bool:
    """Whether every node's /home (``{fs, id: dev:inode, source}`` from hostinfo) is one network
    file system: the same type, source and inode on every node (device numbers of a network
    mount differ between clients, so only the inode is compared)."""
    if len(homes) < 2 or not all(isinstance(h, dict) and h.get("fs") in NETWORK_FS for h in homes):
        return False
    return len({(h["fs"], h.get("source"), str(h.get("id", "")).rpartition(":")[2]) for h in homes}) == 1


class HostVars(dict):
    """``hostvars`` as the engine gives it to templates: every host's variables, a snapshot made
    anew after each play and never changed in place (changing it raises TypeError), so that what
    a filter derives from the whole cluster holds for the play and is computed once
    (:func:`home_writer`), not once per task and host: that was O(hosts²) per run, the most
    of a no-change run's controller CPU at 1024 hosts (issue 37).

    >>> snapshot = HostVars({"n1": {}})
    >>> snapshot["n2"] = {}
    Traceback (most recent call last):
    TypeError: hostvars is a snapshot: it is not changed in place
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.derived: dict[tuple, tuple] = {}  # (filter, id of its arguments) -> (the arguments, result)

    def _refuse(self, *_args, **_kwargs):
        raise TypeError("hostvars is a snapshot: it is not changed in place")

    __setitem__ = __delitem__ = __ior__ = update = setdefault = pop = popitem = clear = _refuse


def home_writer(hostvars: Any, play_hosts: Any, setting: Any = "auto") -> str | None:
    """The one node that writes the users' key pairs and authorized_keys when /home is shared
    (``shared_home: true``, or ``auto`` and detected by :func:`home_shared`): the first host of
    the play that answered this run. None when every node has its own /home. Computed once per
    snapshot of :class:`HostVars` and play (``play_hosts`` as the engine gives it, a tuple)."""
    if isinstance(hostvars, HostVars) and isinstance(play_hosts, tuple) and isinstance(setting, (str, bool, type(None))):
        key = ("home_writer", id(play_hosts), setting)
        found = hostvars.derived.get(key)
        if found is not None and found[0] is play_hosts:
            return found[1]
        result = _home_writer(hostvars, play_hosts, setting)
        hostvars.derived[key] = (play_hosts, result)  # the tuple kept: its id is not reused meanwhile
        return result
    return _home_writer(hostvars, play_hosts, setting)


def _home_writer(hostvars: Any, play_hosts: Any, setting: Any) -> str | None:
    hostvars = hostvars or {}
    live = [h for h in play_hosts or [] if h in hostvars and not hostvars[h].get("cached") and not hostvars[h].get("unknown")]
    if setting in (False, "false", "no", None) or not live:
        return None
    if setting in (True, "true", "yes"):
        return live[0]
    if setting != "auto":
        raise TemplateError(f"shared_home: {shown_value(setting)} is not true, false or auto")
    return live[0] if home_shared([(hostvars[h].get("facts") or {}).get("home") for h in live]) else None


def pluck(results: Any, field: str) -> list:
    """``registered | pluck('public_key')``: the field of each result (loop results flattened),
    skipping missing or empty values."""
    out = []
    items = results if isinstance(results, list) else [results]
    for item in items:
        if isinstance(item, dict) and "results" in item:
            out.extend(pluck(item["results"], field))
        elif isinstance(item, dict) and item.get(field) not in (None, ""):
            out.append(item[field])
    return out


def present_users(users: Any) -> list:
    """``cluster_users | present_users``: the users not marked ``state: absent``."""
    return [u for u in users or [] if u.get("state", "present") != "absent"]


def absent_users(users: Any) -> list:
    """``cluster_users | absent_users``: the users marked ``state: absent`` (they left)."""
    return [u for u in users or [] if u.get("state", "present") == "absent"]


def jupyter_env(user: Any, anaconda: Any) -> str:
    """``item | jupyter_env(anaconda)``: the conda environment a Jupyter user's server runs from:
    her clone of the first prefix (``~NAME/.conda/envs/<prefix's last folder>``) when she has
    ``conda_clone``, else the first prefix itself; "" without an ``anaconda`` prefix."""
    prefixes = [a.get("prefix") for a in anaconda or [] if isinstance(a, dict) and isinstance(a.get("prefix"), str)]
    if not prefixes or not isinstance(user, dict):
        return ""
    prefix = prefixes[0].rstrip("/")
    if user.get("conda_clone"):
        return f"~{user['name']}/.conda/envs/{prefix.rsplit('/', 1)[-1]}"
    return prefix


JUPYTER_SOCKETS = "/var/lib/provision-jupyter"  # root's, 0755; in it one folder per user, hers, 0700


def jupyter_socket(user: Any) -> str:
    """``item | jupyter_socket``: the Unix socket her Jupyter Server listens on with the default
    ``jupyter_listen: localhost``, in a folder only she can enter, on the node's own disk (a
    shared home would give every node one socket file). No other user can listen in her place:
    they cannot enter the folder, let alone make a socket there (issue 33 finding 4). Her
    tunnel forwards a port of her own machine to it (``ssh -N -L 8888:SOCKET alice@node``).

    >>> jupyter_socket({"name": "alice"})
    '/var/lib/provision-jupyter/alice/jupyter.sock'
    """
    name = user.get("name") if isinstance(user, dict) else user
    if not isinstance(name, str) or not USER_NAME.match(name):
        raise TemplateError(f"jupyter_socket: user name {shown_value(name)} is not a user name")
    return f"{JUPYTER_SOCKETS}/{name}/jupyter.sock"


def basename_of(path: Any) -> str:
    """``/opt/anaconda3 | basename_of`` -> ``anaconda3`` (a modulefile's and a clone's name)."""
    return str(path).rstrip("/").rsplit("/", 1)[-1]


FILTERS = {
    "basename_of": basename_of,
    "jupyter_env": jupyter_env,
    "jupyter_socket": jupyter_socket,
    "pluck": pluck,
    "registered": registered,
    "host_key_entries": host_key_entries,
    "node_keys": node_keys,
    "cluster_addresses": cluster_addresses,
    "verified_address": verified_address,
    "home_writer": home_writer,
    "slurm_files": slurm_files,
    "slurm_node_check": slurm_node_check,
    "present_users": present_users,
    "absent_users": absent_users,
}
