"""``doctor --dataset`` where the inventory exports the path over NFS: each client must have it
mounted from the NFS server, else it compares its own local folder (an empty one passes as
"same on every node: 0 files", and a server that holds the files is then blamed).

The node's ``/proc/self/mountinfo`` comes back with the dataset step (every byte hostile: parsed
here, bounded). Its format (proc(5); the kernel's Documentation/filesystems/proc.rst, "3.5
/proc/<pid>/mountinfo"): ``ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - FSTYPE
SOURCE SUPER-OPTIONS``, with space, tab, newline and backslash in paths written as ``\\040``-style
octal escapes. An NFS mount's source is ``SERVER:/EXPORT`` (``[v6addr]:/EXPORT`` for IPv6):

    >>> holding_mount(parse_mountinfo("1 0 0:1 / / rw - ext4 /dev/sda1 rw\\n"
    ...     "2 1 0:2 / /data/imagenet rw - nfs4 10.0.0.73:/data/imagenet rw\\n"), "/data/imagenet/train")
    Mount(point='/data/imagenet', fstype='nfs4', source='10.0.0.73:/data/imagenet')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from provision.doctor.model import FAIL, CheckResult, Mount, NodeReport
from provision.text import printable

MOUNTINFO_LIMIT = 4000  # lines read from a node (a host with thousands of mounts is still bounded)


@dataclass(frozen=True)
class Export:
    """A path the inventory exports (``nfs_exports``) from ``server``, and the names and
    addresses a client may have mounted it from."""

    path: str
    server: str
    addresses: tuple[str, ...]


def _unescape(text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a ``/proc/self/mountinfo`` text; malformed lines skipped."""
    mounts = []
    for line in text.splitlines()[:MOUNTINFO_LIMIT]:
        fields = line.split(" ")
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) < dash + 3:
            continue
        mounts.append(Mount(_unescape(fields[4]), fields[dash + 1], _unescape(fields[dash + 2])))
    return mounts


def holding_mount(mounts: list[Mount], path: str) -> Mount | None:
    """The mount that holds ``path`` (the deepest mount point at or above it; the last one
    mounted wins where several share it, as the kernel shows the top of the stack)."""
    best, depth = None, -1
    for mount in mounts:
        point = mount.point.rstrip("/")
        if (path == (point or "/") or path.startswith(point + "/")) and len(point) >= depth:
            best, depth = mount, len(point)
    return best


def _split_source(source: str) -> tuple[str, str]:
    """``SERVER:/PATH`` -> (server, path); an IPv6 server is bracketed."""
    match = re.fullmatch(r"\[([0-9A-Fa-f:.%\w]+)\]:(/.*)|([^:/\s]+):(/.*)", source)
    if not match:
        return "", ""
    return (match.group(1) or match.group(3)), (match.group(2) or match.group(4))


def inventory_exports(variables: Any, hosts: list) -> tuple[Export, ...]:
    """The paths the inventory's NFS role exports (``nfs_server``, ``nfs_exports``,
    ``nfs_server_address``), as the first of ``hosts`` sees the variables; () when not set."""
    if not hosts:
        return ()
    values = variables.for_host(hosts[0])
    server, exports = values.get("nfs_server"), values.get("nfs_exports")
    if not isinstance(server, str) or not isinstance(exports, list):
        return ()
    names = {server}
    host = variables.inventory.hosts.get(server)
    if host is not None and host.address:
        names.add(host.address)
    if isinstance(values.get("nfs_server_address"), str):
        names.add(values["nfs_server_address"])
    paths = [e["path"].rstrip("/") for e in exports if isinstance(e, dict) and isinstance(e.get("path"), str)]
    return tuple(Export(path, server, tuple(sorted(names))) for path in paths if path.startswith("/"))


def _server_addresses(export: Export, reports: list[NodeReport]) -> set[str]:
    """The export's names plus every address the server's own facts list (without the prefix length)."""
    found = set(export.addresses)
    for report in reports:
        if report.host == export.server and report.facts is not None:
            for interface in report.facts.interfaces:
                found.update(address.split("/")[0] for address in interface.addresses)
    return found


def mounted_from(mount: Mount | None, export: Export, addresses: set[str], path: str) -> str:
    """What ``mount`` is instead of the export from the server (empty when it serves ``path`` from it)."""
    if mount is None:
        return "no mount information"
    if not mount.fstype.startswith("nfs"):
        return f"a local folder ({printable(mount.fstype, 20)} {printable(mount.point, 80)})"
    server, source_path = _split_source(mount.source)
    below = path[len(mount.point.rstrip("/")) :]  # the dataset's part below the client's mount point
    if server not in addresses or (source_path.rstrip("/") + below).rstrip("/") != path:
        return f"mounted from {printable(mount.source, 120)}, not from {export.server}:{export.path}"
    return ""


def check_exported(reports: list[NodeReport], paths: tuple[str, ...], exports: tuple[Export, ...], compare) -> list[CheckResult]:
    """Check 5 (``compare``: :func:`provision.doctor.alike.check_datasets`) with the inventory's
    exports: a dataset under an export is compared only on the server and the clients that mount
    it from the server; every other client is named (a fail: its jobs would read a different
    folder). Paths the inventory does not export: as before."""
    results = []
    for index, path in enumerate(paths):
        only = [replace(r, datasets=r.datasets[index : index + 1]) for r in reports]
        export = next((e for e in exports if path == e.path or path.startswith(e.path + "/")), None)
        if export is None:
            results += compare(only, (path,))
            continue
        addresses = _server_addresses(export, reports)
        astray = {}
        for report in only:
            if not report.ok or report.host == export.server or not report.datasets:
                continue
            why = mounted_from(report.datasets[0].mount, export, addresses, path)
            if why:
                astray[report.host] = why
        [compared] = compare([r for r in only if r.host not in astray], (path,))
        if not astray:
            results.append(compared)
            continue
        names = sorted(astray)
        said = "; ".join(f"{host}: {astray[host]}" for host in names[:4]) + ("; ..." if len(names) > 4 else "")
        detail = (
            f"not mounted from the NFS server {export.server} ({export.server}:{export.path}) on {len(names)} node(s): {said}. "
            f"Mount it there: `mount {path}` (setup-cluster --tags nfs writes its fstab line)"
        )
        if compared.status != "pass":
            detail += f". Among the others: {compared.detail}"
        nodes = {host: f"not mounted from {export.server}: {astray[host]}" for host in names} | {
            host: why for host, why in compared.nodes.items() if host not in astray
        }
        hosts = tuple(names) + tuple(h for h in compared.hosts if h not in astray)
        results.append(CheckResult(compared.name, FAIL, hosts, detail, nodes=nodes))
    return results
