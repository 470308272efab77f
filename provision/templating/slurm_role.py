"""The Slurm role's settings and files, computed once on the controller: the filter
``slurm | default({}) | slurm_files(groups, provision_facts_dir, inventory_dir, inventory_hostname)``.

Two forms of the inventory's ``slurm:``:

- **Slurm from zero** (``controller`` set): provision installs Slurm on the controller and the
  compute nodes (``nodes``), gives them one MUNGE key, writes ``slurm.conf`` whole
  (``conf_owner: provision``, the default; or its managed block in the admin's own file with
  ``conf_owner: admin``), ``gres.conf`` and ``cgroup.conf``, and starts munge, slurmctld and
  slurmd. Only the controller and the compute nodes are touched.
- **The admin's Slurm** (no ``controller``: the form before issue 36, still valid): every host
  of the run gets the managed block of node lines in the slurm.conf the admin installed, and
  gres.conf; nothing is installed or started.

Every setting is checked here, before any command runs on a host: a controller that is no inventory
host, or that names two hosts (Slurm's backup controllers need a state folder both share, which
provision does not set up), a node without facts, a setting that slurm.conf could not hold.

>>> sorted(SLURM_DEFAULTS)[:4]
['cgroup', 'cluster_name', 'conf', 'conf_owner']
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from provision import __version__
from provision.errors import FactsError, NodeFault, ProvisionError, TemplateError, note_fault
from provision.plans.gres import plan_gres
from provision.plans.slurm import RESERVED_NODE_NAMES, node_name
from provision.text import shown_value

SLURM_DEFAULTS = {
    "conf": "/etc/slurm/slurm.conf",
    "gres": "/etc/slurm/gres.conf",
    "cgroup": "/etc/slurm/cgroup.conf",
    "nodes": "all",
    "facts_dir": None,
    "controller": None,
    "conf_owner": None,  # provision (whole file) with a controller, else admin (the managed block)
    "cluster_name": "cluster",
    "partition": "batch",
    "health_check": None,  # where doctor's node check goes (HealthCheckProgram), if anywhere
    "health_check_interval": 300,  # seconds between slurmd's runs of it (HealthCheckInterval)
    "health_check_prolog": False,  # also run it before each job (Prolog)
    "munge_key": None,  # controller file; default secrets/munge.key beside the inventory, made once
}
# slurm.conf(5) ClusterName: upper case is mapped to lower case "silently", so only lower case is
# taken; a partition's name is one word of slurm.conf (DEFAULT would set every partition's values).
_CLUSTER_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
_PARTITION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_OWNERS = ("provision", "admin")
# A path slurm.conf names (HealthCheckProgram=): one word of safe characters, so that the inventory
# can never add a line or a setting to the file every node reads.
_PROGRAM = re.compile(r"(/[A-Za-z0-9._+@-]+)+")


def _named_hosts(names: Any, groups: dict, what: str) -> list[str]:
    """The inventory hosts ``names`` names (a group or host name, or a list of them), in
    inventory order; a name that is neither is an error naming it."""
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise TemplateError(f"slurm: {what} must be a group or host name or a list of them, not {shown_value(names)}")
    every = list(groups.get("all") or [])
    chosen: set[str] = set()
    for name in names:
        if name in groups:
            chosen.update(groups[name])
        elif name in every:
            chosen.add(name)
        else:
            raise TemplateError(f"slurm: {what}: {shown_value(name)} is no group or host of the inventory")
    return [host for host in every if host in chosen]


def _controller(value: Any, groups: dict) -> str | None:
    """The one controller host, or None (the admin's Slurm); two or more is an error naming them."""
    if value is None:
        return None
    hosts = _named_hosts(value, groups, "controller")
    if len(hosts) != 1:
        raise TemplateError(
            f"slurm: controller names {len(hosts)} hosts ({', '.join(hosts)}): give one; provision sets up one "
            "slurmctld (a backup controller needs a StateSaveLocation both share, which it does not set up)"
        )
    return hosts[0]


@lru_cache(maxsize=8)
def _slurm_plan(names: tuple[str, ...], facts_dir: str, _stamp: int) -> tuple[str, str, dict[str, str]]:
    # Facts files are replaced by rename, so the folder's mtime (``_stamp``) changes with any of them.
    from provision.probe.store import load_host  # the fact parsers: only for a play that renders Slurm's files

    facts, errors = [], []
    for name in names:
        try:
            facts.append(load_host(Path(facts_dir), name))
        except FactsError as error:
            errors.append(str(error))
    plan = plan_gres(facts, __version__)
    errors.extend(error for error in plan.errors if error not in plan.faults.values())
    if errors:  # the inventory's or the facts folder's: wrong for every host
        raise TemplateError("slurm: " + "; ".join(errors))
    return plan.gres_conf, plan.slurm_conf, dict(plan.faults)


def _checked(settings: Any) -> dict:
    """The settings with :data:`SLURM_DEFAULTS` filled in, each checked (not yet the hosts)."""
    if settings in (None, False):
        settings = {}
    if not isinstance(settings, dict):
        raise TemplateError(f"slurm: must be a mapping ({', '.join(SLURM_DEFAULTS)}), not {shown_value(settings)}")
    unknown = sorted(set(settings) - set(SLURM_DEFAULTS))
    if unknown:
        raise TemplateError(f"slurm: unknown key {', '.join(unknown)} (known: {', '.join(SLURM_DEFAULTS)})")
    merged = {**SLURM_DEFAULTS, **{k: v for k, v in settings.items() if v is not None}}
    for key in ("conf", "gres", "cgroup"):
        if not isinstance(merged[key], str) or not merged[key].startswith("/"):
            raise TemplateError(f"slurm: {key} must be an absolute path, not {shown_value(merged[key])}")
    if not isinstance(merged["cluster_name"], str) or not _CLUSTER_NAME.fullmatch(merged["cluster_name"]):
        raise TemplateError(
            f"slurm: cluster_name {shown_value(merged['cluster_name'])}: 1-40 lower-case letters, digits, '_' or '-' "
            "(Slurm maps upper case to lower case silently)"
        )
    partition = merged["partition"]
    if not isinstance(partition, str) or not _PARTITION.fullmatch(partition) or partition.lower() in RESERVED_NODE_NAMES:
        raise TemplateError(
            f"slurm: partition {shown_value(partition)}: one word of letters, digits, '.', '_' or '-', not DEFAULT or ALL"
        )
    if merged["munge_key"] is not None and (not isinstance(merged["munge_key"], str) or not merged["munge_key"]):
        raise TemplateError(f"slurm: munge_key must be a file on the controller, not {shown_value(merged['munge_key'])}")
    check = merged["health_check"]
    if check is not None and (not isinstance(check, str) or not _PROGRAM.fullmatch(check)):
        raise TemplateError(
            f"slurm: health_check must be an absolute path of letters, digits, '.', '_', '+', '@', '-' and '/', "
            f"not {shown_value(check)}"
        )
    interval = merged["health_check_interval"]
    if isinstance(interval, bool) or not isinstance(interval, int) or not 1 <= interval <= 65535:
        # slurm.conf(5) of 22.05, HealthCheckInterval: "The default value is zero, which disables
        # execution", the start-up run too (SchedMD/slurm d525b6872a10, src/slurmd/slurmd/slurmd.c:2858-2859
        # "if (slurm_conf.health_check_program &&" / "slurm_conf.health_check_interval) {")
        raise TemplateError(
            f"slurm: health_check_interval {shown_value(interval)}: seconds between slurmd's runs of the node check, "
            "1 to 65535 (0 would stop slurmd running it at all)"
        )
    if not isinstance(merged["health_check_prolog"], bool):
        raise TemplateError(f"slurm: health_check_prolog must be true or false, not {shown_value(merged['health_check_prolog'])}")
    named = [key for key in ("health_check_interval", "health_check_prolog") if key in settings and settings[key] is not None]
    if named and check is None:
        raise TemplateError(f"slurm: {' and '.join(named)} without health_check: say where the node check goes")
    if merged["conf_owner"] is not None and merged["conf_owner"] not in _OWNERS:
        raise TemplateError(
            f"slurm: conf_owner {shown_value(merged['conf_owner'])}: provision (slurm.conf written whole) or admin "
            "(the admin's slurm.conf, provision's managed block in it)"
        )
    return merged


def slurm_files(settings: Any, groups: Any, facts_dir: Any = None, base_dir: Any = ".", host: Any = None) -> dict:
    """The role's settings (:data:`SLURM_DEFAULTS` filled in) with ``gres_conf`` (gres.conf) and
    ``node_lines`` (``GresTypes=gpu`` and the NodeName lines), exactly as ``provision slurm-gres``
    and its ``--slurm-conf`` write them, for every host ``nodes`` names in the inventory (not
    only this run's: the files are cluster-wide); ``controller`` (the host, or None),
    ``slurmctld_host`` (its NodeName-style short name), ``install`` (Slurm from zero),
    ``owns_conf`` (slurm.conf written whole), ``conf_dir`` (slurm.conf's folder) and ``targets``
    (the hosts that get Slurm's files: the controller and the nodes from zero, else every host). A host without facts is an error
    naming it and what to run. ``facts_dir`` (relative to ``base_dir``, the inventory's folder)
    defaults to setup-cluster's ``--facts-dir``.

    A node whose own report is at fault (it claims ``DEFAULT``, ``ALL`` or another node's name;
    its GPUs could not be listed) is left out of both files and ``left_out`` names it; rendered
    for that node (``host``), the filter raises :class:`NodeFault`: that node fails, the others
    get the files without it. Without ``host`` (a playbook of one's own calling it the old way),
    such a node is an error like any other, refusing the run."""
    merged = _checked(settings)
    groups = dict(groups or {})
    controller = _controller(merged["controller"], groups)
    owner = merged["conf_owner"] or ("provision" if controller else "admin")
    if owner == "provision" and controller is None:
        raise TemplateError("slurm: conf_owner provision needs slurm.controller (the SlurmctldHost of the slurm.conf it writes)")
    slurm_conf_only = [k for k in ("health_check_interval", "health_check_prolog") if (settings or {}).get(k) is not None]
    if owner == "admin" and slurm_conf_only:
        raise TemplateError(
            f"slurm: {' and '.join(slurm_conf_only)} set lines of the slurm.conf provision writes; the admin's slurm.conf "
            "(conf_owner admin) names the node check itself: HealthCheckInterval=, Prolog="
        )
    if merged["facts_dir"] is not None:  # the inventory's setting: relative to its folder
        if not isinstance(merged["facts_dir"], str) or not merged["facts_dir"]:
            raise TemplateError(f"slurm: facts_dir must be a folder, not {shown_value(merged['facts_dir'])}")
        folder = Path(str(base_dir or ".")) / Path(merged["facts_dir"]).expanduser()
    elif facts_dir:  # setup-cluster's --facts-dir (relative to where it runs, as for probe and slurm-gres)
        folder = Path(str(facts_dir))
    else:
        raise TemplateError("slurm: no facts folder: set slurm.facts_dir or give setup-cluster --facts-dir")
    names = _named_hosts(merged["nodes"], groups, "nodes")
    try:
        stamp = folder.stat().st_mtime_ns
    except OSError:
        stamp = 0  # no folder: every host is reported without facts
    gres_conf, node_lines, faults = _slurm_plan(tuple(names), str(folder), stamp)
    if faults and host is None:
        raise TemplateError("slurm: " + "; ".join(faults.values()))
    left_out = {name: f"slurm: {why}; slurm.conf and gres.conf are written without {name}" for name, why in faults.items()}
    for name, why in left_out.items():  # in the run or not (--limit): the run says so and exits 1
        note_fault(name, why)
    if str(host) in left_out:
        raise NodeFault(str(host), left_out[str(host)])
    every = list(groups.get("all") or [])
    targets = [h for h in every if h == controller or h in names] if controller else every
    return {
        **merged,
        "facts_dir": str(folder),
        "conf_dir": merged["conf"].rsplit("/", 1)[0] or "/",
        "nodes": [name for name in names if name not in faults],
        "left_out": sorted(faults),
        "gres_conf": gres_conf,
        "node_lines": node_lines,
        "controller": controller,
        "slurmctld_host": node_name(controller) if controller else None,
        "install": controller is not None,
        "conf_owner": owner,
        "owns_conf": owner == "provision",
        "targets": targets,
    }


@lru_cache(maxsize=8)
def _node_check(names: tuple[str, ...], facts_dir: str, _stamp: int) -> str:
    from provision.plans.node_check import node_script  # the fact parsers: only for a play that renders it
    from provision.probe.store import load_host

    try:
        return node_script([load_host(Path(facts_dir), name) for name in names])
    except ProvisionError as error:  # FactsError too: the inventory's or the facts folder's
        raise TemplateError(f"slurm: health_check: {error}") from None


def slurm_node_check(settings: Any, groups: Any, facts_dir: Any = None, base_dir: Any = ".", host: Any = None) -> str:
    """``slurm | slurm_node_check(groups, provision_facts_dir, inventory_dir, inventory_hostname)``:
    doctor's node check (``provision doctor --node-script``) for the nodes :func:`slurm_files`
    writes lines for, the same script for every host; ``slurm.health_check`` must be an absolute
    path (where it goes)."""
    merged = slurm_files(settings, groups, facts_dir, base_dir, host)
    if merged["health_check"] is None:
        raise TemplateError("slurm: health_check is not set: say where the node check goes")
    folder = Path(merged["facts_dir"])
    try:
        stamp = folder.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _node_check(tuple(merged["nodes"]), str(folder), stamp)
