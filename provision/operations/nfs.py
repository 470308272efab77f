"""Shared dataset paths over NFS.

- ``nfs_server_kind``: which server the NFS server node uses: the kernel's (``exportfs``) where
  the kernel can serve NFS here, else nfs-ganesha (userspace, e.g. in an unprivileged container);
  registered, so the playbook's next tasks pick the matching template.
- ``nfs_dataset``: the exported folder exists on the server; a missing one is created only with
  ``create: true`` (inventory ``nfs_create_missing``), else refused.
- ``nfs_mount``: on a client, the mount point created, one ``/etc/fstab`` line
  (``server:/path /path nfs ro,_netdev,... 0 0``, never duplicated; another source for that
  mount point is refused) and the mount attempted where this node can mount NFS at all (kernel
  client, ``mount.nfs`` and CAP_SYS_ADMIN); what it lacks is registered for the summary. A mount
  point that is already a mount of something else is refused, never mounted over.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from provision.errors import ArgumentError
from provision.operations.base import UNKNOWN, Arg, FileState, Operation, OperationError, Run, StateKey, check_path, shell_path
from provision.operations.files import content_changes
from provision.text import printable, shown_value

_OPTIONS = re.compile(r"^[A-Za-z0-9_=.,-]{1,200}\Z")
_SERVER = re.compile(r"^[A-Za-z0-9:][A-Za-z0-9.:_-]{0,252}\Z")  # ':' first: an IPv6 address (::1), checked below


_EXPORT_PATH = re.compile(r"^/[A-Za-z0-9._/+-]+\Z")


def check_export_path(path: Any) -> str:
    """An exported path: absolute, not /, only ``A-Za-z0-9._/+-`` (it goes into shell scripts run as
    root, /etc/exports, fstab and ganesha.conf: nothing there may need quoting)."""
    if isinstance(path, str) and not _EXPORT_PATH.match(path) and path.startswith("/"):
        raise ArgumentError(f"nfs: export path {shown_value(path)} may only hold letters, digits and . _ / + -")
    path = check_path(path)
    if path.startswith("~") or path == "/" or not _EXPORT_PATH.match(path):
        raise ArgumentError(
            f"nfs: export path {shown_value(path)} must be an absolute folder (only letters, digits and . _ / + -), not /"
        )
    return path


_CLIENT = re.compile(r"^[A-Za-z0-9:][A-Za-z0-9.:_-]{0,252}(/[0-9]{1,3})?\Z")  # ':' first: IPv6 (::1), never a name
_LABEL = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\Z")


def check_client(client: Any) -> str:
    """One export client, as exports(5) and ganesha's ``Clients`` read it: an address
    (``10.0.0.74``, ``fd00::4a``), a network with its prefix length (``10.0.0.0/24``; host bits
    set or a prefix out of range refused, naming the network meant; ``/0`` is everyone, as ``*``)
    or a host name (labels of letters, digits, ``-`` and ``_``). Wildcards, netgroups and ``*``
    are never taken: the list must say who, exactly.

    >>> check_client("10.0.0.0/24"), check_client("node01.cluster")
    ('10.0.0.0/24', 'node01.cluster')
    """
    if not isinstance(client, str) or not _CLIENT.match(client):
        raise ArgumentError(
            f"nfs_clients: {shown_value(client)} is not an address, network (10.0.0.0/24) or host name (and * is never allowed)"
        )
    address, slash, _prefix = client.partition("/")
    try:
        ipaddress.ip_address(address)
        is_address = True
    except ValueError:
        is_address = False
    if slash:
        if not is_address:
            raise ArgumentError(
                f"nfs_clients: network {shown_value(client)} must be an address and a prefix length, e.g. 10.0.0.0/24"
            )
        try:
            network = ipaddress.ip_network(client)
        except ValueError as error:
            meant = ""
            if "host bits set" in str(error):
                meant = f" (did you mean {ipaddress.ip_network(client, strict=False)}?)"
            raise ArgumentError(f"nfs_clients: network {shown_value(client)}: {error}{meant}") from None
        if network.prefixlen == 0:
            raise ArgumentError(f"nfs_clients: network {shown_value(client)} is every address, like *: never allowed")
        return client
    if is_address:
        return client
    if ":" in client or re.fullmatch(r"[0-9.]+", client) or not all(_LABEL.match(label) for label in client.split(".")):
        raise ArgumentError(f"nfs_clients: {shown_value(client)} is neither a valid address nor a host name")
    return client


def check_clients(clients: Any) -> list[str]:
    """The export's client list (:func:`check_client` each): never ``*``, never empty."""
    if not isinstance(clients, list) or not clients:
        raise ArgumentError(
            "nfs_clients: no client addresses to export to (set nfs_clients, or run with every node reachable once)"
        )
    return list(dict.fromkeys(check_client(client) for client in clients))


def _check_requests(args: dict) -> list[StateKey]:
    """Validate the NFS variables as a whole (no facts needed): bad input before any host. The
    two halves come together: a server with nothing to export (or ``nfs_export:``, a typo) and
    exports with no server are refused here, not left to fail on the server's later tasks."""
    exports, server = args["exports"], args["server"]
    if exports is None:
        if server is not None:
            raise ArgumentError(
                f"nfs_server is {server} but nfs_exports is not set: list the folders it exports, "
                "e.g. nfs_exports: [{path: /data/imagenet}] (or remove nfs_server)"
            )
        return []
    if not isinstance(exports, list):
        raise ArgumentError("nfs_exports must be a list of {path, mode}, e.g. nfs_exports: [{path: /data/imagenet, mode: ro}]")
    for index, export in enumerate(exports):
        if not isinstance(export, dict) or "path" not in export or set(export) - {"path", "mode"}:
            raise ArgumentError(
                f"nfs_exports[{index}]: expected {{path: /folder, mode: ro|rw}}, got {printable(str(export), 80)}"
            )
        check_export_path(export["path"])
        if export.get("mode", "ro") not in ("ro", "rw"):
            raise ArgumentError(f"nfs_exports[{index}]: mode must be ro or rw, not {printable(str(export['mode']), 40)}")
    if exports and server is None:
        raise ArgumentError(
            "nfs_exports is set but nfs_server is not: name the inventory host that exports them (nfs_server: HOST)"
        )
    hosts = args["hosts"] or []
    if exports and server not in hosts:
        raise ArgumentError(
            f"nfs_server {printable(str(server), 80)} is not a host of the inventory (hosts: {', '.join(hosts[:12])})"
        )
    if args["clients"] is not None:
        check_clients(args["clients"])
    return []


def _kind_requests(args: dict) -> list[StateKey]:
    if args["server"] not in ("auto", "kernel", "ganesha"):
        raise ArgumentError(f"nfs_server_kind: server must be auto, kernel or ganesha, not {shown_value(args['server'])}")
    if args.get("clients") is not None:  # None while the engine pre-reads the facts of a task not yet rendered
        check_clients(args["clients"])
    return [StateKey("nfsd"), StateKey("systemd")]


def chosen_server(args: dict, current: Mapping[StateKey, Any]) -> str:
    """``kernel`` or ``ganesha`` for this host."""
    kernel = current.get(StateKey("nfsd")) == "kernel"
    if args["server"] == "kernel" and not kernel:
        raise OperationError(
            "nfs_server: kernel was asked for, but this kernel cannot serve NFS here "
            "(no nfsd, or no CAP_SYS_ADMIN); use nfs_server_kind: ganesha or auto"
        )
    if args["server"] == "ganesha":
        return "ganesha"
    return "kernel" if kernel else "ganesha"


def plan_kind(args: dict, current: Mapping[StateKey, Any]) -> list:
    """No change; fails only when the kernel server is required and unusable."""
    chosen_server(args, current)
    return []


def result_kind(args: dict, current: Mapping[StateKey, Any]) -> dict:
    """``{"server": "kernel"|"ganesha", "clients": [...], "systemd": bool}`` for the next tasks
    (the templates; under systemd, nfs-ganesha runs as the package's service, which its install
    starts on the NFS port, not as a daemon of provision's own)."""
    return {
        "server": chosen_server(args, current),
        "clients": check_clients(args["clients"]),
        "systemd": bool(current.get(StateKey("systemd"))),
    }


def _dataset_requests(args: dict) -> list[StateKey]:
    return [StateKey("file", check_export_path(args["path"]))]


def plan_dataset(args: dict, current: Mapping[StateKey, Any]) -> list:
    """The folder exists (ok), is created (``create``), or the task fails naming the variable."""
    path = check_export_path(args["path"])
    state = current.get(StateKey("file", path))
    if state is not None:
        if state.kind != "d":
            raise OperationError(f"dataset path {path} exists on the NFS server but is not a folder")
        return []
    if not args["create"]:
        raise OperationError(
            f"dataset path {path} does not exist on the NFS server "
            "(create it, or set nfs_create_missing: true to let setup-cluster create it)"
        )
    return [
        Run(
            f"mkdir -p {shell_path(path)} && chmod 0755 {shell_path(path)}",
            f"create dataset folder {path}",
            ((StateKey("file", path), FileState("d", 0o755)),),
            (path,),
        )
    ]


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def fstab_line(args: dict) -> str:
    """``server:/path /path nfs OPTIONS 0 0``."""
    path = check_export_path(args["path"])
    server = args["server"]
    if not isinstance(server, str) or not _SERVER.match(server) or (server.startswith(":") and not _is_address(server)):
        raise ArgumentError(f"nfs_mount: server {shown_value(server)} is not a host name or address")
    options = args["options"] or ("rw" if args["mode"] == "rw" else "ro") + ",_netdev,nofail,vers=4"
    if not _OPTIONS.match(options):
        raise ArgumentError(f"nfs_mount: options {shown_value(options)} hold characters fstab cannot take")
    source = f"[{server}]" if ":" in server else server
    return f"{source}:{path} {path} nfs {options} 0 0"


def _mount_requests(args: dict) -> list[StateKey]:
    path = check_export_path(args["path"])
    if args.get("server") is not None:  # None while the engine pre-reads the facts of a task not yet rendered
        fstab_line(args)
    return [StateKey("mount", path), StateKey("nfsmount"), StateKey("file", path), StateKey("file", "/etc/fstab")]


def _fstab_edit(text: str, line: str) -> tuple[str, str | None]:
    """The new fstab text and, when another source already claims the mount point, that line."""
    source, path = line.split()[:2]
    lines = text.splitlines()
    for old in lines:
        fields = old.split()
        if len(fields) >= 2 and not old.lstrip().startswith("#") and fields[1] == path:
            if fields[0] == source:
                return text, None  # ours (maybe with the user's own options): kept, never duplicated
            return text, old
    return "\n".join([*lines, line]) + "\n", None


def plan_mount(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Mount point, fstab line, mount attempt (where possible); refuse a foreign mount."""
    path = check_export_path(args["path"])
    line = fstab_line(args)
    source = line.split()[0]
    mounted = current.get(StateKey("mount", path))
    if mounted is not None:
        if mounted[0] == source and mounted[1].startswith("nfs"):
            return []
        other = f"{printable(mounted[0], 200)} ({printable(mounted[1], 40)})"
        raise OperationError(f"{path} is already a mount of {other}; refusing to mount {source} over it")
    changes: list = []
    state = current.get(StateKey("file", path))
    if state is None:
        changes.append(
            Run(
                f"mkdir -p {shell_path(path)}",
                f"create mount point {path}",
                ((StateKey("file", path), FileState("d", 0o755)),),
                (path,),
            )
        )
    elif state.kind != "d":
        raise OperationError(f"mount point {path} exists and is not a folder")
    fstab = current.get(StateKey("file", "/etc/fstab"))
    text = fstab.content.decode(errors="replace") if fstab is not None and fstab.content is not None else ""
    new, conflict = _fstab_edit(text, line)
    if conflict:
        raise OperationError(
            f"/etc/fstab already mounts something else at {path}: {shown_value(conflict.strip())}; refusing to change it"
        )
    if new != text:
        changes += content_changes("/etc/fstab", new.encode(), {"mode": fstab.mode if fstab else 0o644}, fstab)
    if not current.get(StateKey("nfsmount")):  # nothing missing: try the mount
        changes.append(Run(f"mount {shell_path(path)}", f"mount {source} at {path}", ((StateKey("mount", path), UNKNOWN),)))
    return changes


def result_mount(args: dict, current: Mapping[StateKey, Any]) -> dict:
    """``{"path", "mountable", "missing"}``: what this node lacks to mount NFS, for the summary."""
    missing = list(current.get(StateKey("nfsmount")) or ())
    return {"path": check_export_path(args["path"]), "mountable": not missing, "missing": missing}


OPERATIONS = {
    "nfs_check": Operation(
        "nfs_check",
        {
            "exports": Arg((list,), help="nfs_exports: [{path, mode}]"),
            "server": Arg((str,), help="nfs_server: an inventory host"),
            "hosts": Arg((list,), help="the inventory's hosts (the server must be one)"),
            "clients": Arg((list,), help="nfs_clients (* refused)"),
        },
        _check_requests,
        lambda args, current: [],
        doc="the NFS variables checked before any command runs on a host",
    ),
    "nfs_server_kind": Operation(
        "nfs_server_kind",
        {
            "server": Arg((str,), default="auto", help="auto, kernel or ganesha"),
            "clients": Arg((list,), True, help="addresses the exports are given to"),
        },
        _kind_requests,
        plan_kind,
        result=result_kind,
        result_requests=_kind_requests,
        doc="kernel NFS server where possible, else nfs-ganesha (registered)",
    ),
    "nfs_dataset": Operation(
        "nfs_dataset",
        {
            "path": Arg((str,), True, help="the exported folder"),
            "create": Arg((bool,), default=False, help="create it when missing (else the host fails)"),
        },
        _dataset_requests,
        plan_dataset,
        doc="an exported folder exists (or is created on request)",
    ),
    "nfs_mount": Operation(
        "nfs_mount",
        {
            "server": Arg((str,), True, help="the address the client mounts from"),
            "path": Arg((str,), True, help="export path, and the mount point (the same path)"),
            "mode": Arg((str,), default="ro", help="ro or rw"),
            "options": Arg((str,), help="fstab options (default from mode: ro,_netdev,nofail,vers=4)"),
        },
        _mount_requests,
        plan_mount,
        result=result_mount,
        result_requests=lambda a: [StateKey("nfsmount")],
        doc="an NFS mount point, its fstab line, and the mount where possible",
    ),
}
