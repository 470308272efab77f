"""After a setup-cluster run: what the roles of issue 8 achieved, per node, checked for real.

- **NFS**: which server the NFS server node runs (kernel or nfs-ganesha); a fresh marker file
  written on the server in each exported folder is read back by every other node **at the same
  path**; where the node could not mount, it is read over NFS from that node with libnfs's
  ``nfs-cat`` (userspace client) to prove the export serves it. Per node: "same path, same
  content", or what is missing.
- **Anaconda**: each clone's disk use (``du -sm``).
- **Jupyter**: how each user reaches their server (the SSH tunnel command, or the HTTPS URL).

Scripts are built and parsed by pure functions; nodes run them in parallel, one round trip each.
What a node reports is framed with the run's nonce (:mod:`provision.transport.frames`): one frame
per export read (``nfs INDEX``) and per clone measured (``du INDEX``), one per marker the server
made (``made INDEX``); a frame its script cannot print is refused.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import shlex
from dataclasses import dataclass
from typing import Any

from provision.engine.membership import verified_addresses
from provision.engine.script import remote_command, stdin_for
from provision.errors import ParseError
from provision.inventory.model import check_user
from provision.operations.conda import clone_name
from provision.operations.nfs import check_export_path
from provision.templating.filters import jupyter_socket
from provision.text import is_number, printable, shown_value
from provision.transport.frames import frame_line, frame_record, frame_setup, new_nonce, split_frames
from provision.transport.options import HostFailure
from provision.transport.parallel import fan_out

MARKER = ".provision-nfs-check"  # + "." + 16 random hex digits, one name per run


@dataclass(frozen=True)
class SummaryLine:
    """One line of the summary: the role, the node, the text, and whether it is a problem."""

    role: str
    host: str
    text: str
    ok: bool = True
    checked: bool = True  # False: not tried, the host (or the NFS server) stopped in the run; ``text`` says why


def _q(value: str) -> str:
    return shlex.quote(value)


def read_marker(marker: str) -> str:
    """The command that prints the first 200 bytes of ``marker``, as root, in a folder users may
    write: never through a link (O_NOFOLLOW: a user who swapped the marker for a link to
    /etc/shadow gets "Too many levels of symbolic links" read back, not the file), never waiting
    on a FIFO (O_NONBLOCK); what failed is printed instead (it is the verdict's reason)."""
    return f"dd if={_q(marker)} iflag=nofollow,nonblock bs=200 count=1 status=none 2>&1"


def node_script(
    exports: list[str],
    server_address: str | None,
    token: str | None,
    clones: list[tuple[str, str]],
    marker_name: str = "",
    nonce: str = "",
) -> str:
    """The script a node runs as root: for the ``N``-th export path a frame ``nfs N`` saying how it
    read the marker ``marker_name`` (``mount``, ``nfs-cat`` or ``none``) and what it read; for the
    ``N``-th (user, env name) clone a frame ``du N`` with its size in MB (or ``absent``)."""
    lines = ["set -u", frame_setup(nonce or new_nonce())]
    if token is not None and server_address:
        if not re.fullmatch(re.escape(MARKER) + r"\.[0-9a-f]{16}", marker_name):
            raise ValueError(f"marker name {shown_value(marker_name)} is not {MARKER}.<16 hex digits>")
        for index, path in enumerate(exports):
            path = check_export_path(path)
            marker = f"{path}/{marker_name}"
            url = f"nfs://{server_address}{marker}?version=4"
            mounted = frame_record("nfs", index, body="mount %s", words=(f'"$({read_marker(marker)} | head -n 1)"',))
            served = frame_record("nfs", index, body="nfs-cat %s", words=('"$(printf \'%s\' "$r" | head -c 200 | head -n 1)"',))
            lines.append(
                f'if awk -v p={_q(path)} \'$5 == p {{ for (i = 7; i <= NF; i++) if ($i == "-" && $(i+1) ~ /^nfs/) f = 1 }} '
                f"END {{ exit !f }}' /proc/self/mountinfo; then {mounted}; "
                # Retries: NFSv4 clients starting at the same moment can collide (NFS4ERR_STALE_CLIENTID),
                # and a server that just (re)started is in its grace period for a few seconds.
                "elif command -v nfs-cat >/dev/null 2>&1; then "
                f"for i in 1 2 3 4 5; do r=$(timeout 20 nfs-cat {_q(url)} 2>&1) && break; sleep $i; done; {served}; "
                f"else {frame_record('nfs', index, body='none')}; fi"
            )
    for index, (user, name) in enumerate(clones):
        check_user(user)
        env = f'"$h/.conda/envs/"{_q(name)}'
        # Measured as the user: a link she planted in her home leads only where she may read.
        size = 'cd / && [ -d "$1" ] && du -sm -- "$1" 2>/dev/null | cut -f1'
        measured = frame_record("du", index, body="%s", words=('"$s"',))
        lines.append(
            f"h=$(getent passwd {_q(user)} | cut -d: -f6); "
            f'if [ -n "$h" ] && s=$(runuser -u {_q(user)} -- sh -c {_q(size)} sh {env} </dev/null) && [ -n "$s" ]; '
            f"then {measured}; else {frame_record('du', index, body='absent')}; fi"
        )
    return "\n".join(lines) + "\n"


def parse_node(
    text: str, nonce: str, exports: list[str], clones: list[tuple[str, str]]
) -> tuple[dict[str, tuple[str, str]], dict[tuple[str, str], str]]:
    """``({path: (how, what was read)}, {(user, env): size or 'absent'})`` from the output of
    :func:`node_script` with ``nonce``, ``exports`` and ``clones``. What comes outside the frames is
    ignored (a login banner); a frame the script cannot print (another label, an index it was not
    given, a second frame for one index, a way of reading it does not know) raises
    :class:`ParseError`."""
    nfs: dict[str, tuple[str, str]] = {}
    du: dict[tuple[str, str], str] = {}
    for frame in split_frames(text, nonce):
        wanted = {"nfs": exports, "du": clones}.get(frame.label)
        if wanted is None or len(frame.numbers) != 1 or frame.numbers[0] >= len(wanted):
            raise ParseError("role check", f"unexpected frame {shown_value(frame.label[:40])} {list(frame.numbers)}")
        thing, body = wanted[frame.numbers[0]], frame.body.split("\n", 1)[0]
        if thing in (nfs if frame.label == "nfs" else du):
            raise ParseError("role check", f"{frame.label} {frame.numbers[0]} reported twice")
        if frame.label == "nfs":
            how, _, read = body.partition(" ")
            if how not in ("mount", "nfs-cat", "none"):
                raise ParseError("role check", f"nfs {frame.numbers[0]}: read by {shown_value(how[:40])}")
            nfs[thing] = (how, printable(read, 200))
        else:
            du[thing] = printable(body, 40) or "absent"
    return nfs, du


def nfs_verdict(host: str, path: str, how: str, read: str, token: str, missing: list[str]) -> SummaryLine:
    """The summary line for one node and one export path."""
    lacks = f"not mounted ({'; '.join(missing)})" if missing else "not mounted"
    if how == "mount":
        if read == token:
            return SummaryLine("nfs", host, f"{path}: same path, same content (NFS mount)")
        return SummaryLine(
            "nfs", host, f"{path}: mounted, but the marker read back {shown_value(read[:80])}, not the server's", False
        )
    if how == "nfs-cat":
        if read == token:
            return SummaryLine(
                "nfs",
                host,
                f"{path}: {lacks}; read over NFS from this node with nfs-cat: same content (the export serves this node)",
                True,
            )
        return SummaryLine("nfs", host, f"{path}: {lacks}; nfs-cat from this node failed: {read[:120]}", False)
    return SummaryLine("nfs", host, f"{path}: {lacks}; nfs-cat not installed (Debian libnfs-utils) to check the export", False)


def jupyter_lines(
    host: str, login: str, users: list[dict], listen: str, anaconda: list | None = None, ssh_port: int | None = None
) -> list[SummaryLine]:
    """How each Jupyter user of ``host`` reaches her server (no secret in it): the exact ``ssh -L``
    line to ``login`` (the node's address; ``ssh_port`` when not 22), which forwards her own
    machine's ``jupyter_port`` to her server's Unix socket on the node (OpenSSH's ``-L
    [bind_address:]port:remote_socket``; Jupyter Server itself suggests ``ssh -L
    8888:{sock} -N user@this_host`` for a socket), and the URL she opens; or the HTTPS URL when
    it listens on every interface; and how her server starts: its systemd unit (setup-cluster
    writes it where ``anaconda`` is set; enabled with ``jupyter_service``), or by hand.

    >>> jupyter_lines("n1", "10.0.0.7", [{"name": "alice", "jupyter_port": 8888}], "localhost")[0].text.split(";")[0]
    'alice: ssh -N -L 8888:/var/lib/provision-jupyter/alice/jupyter.sock alice@10.0.0.7  then open https://localhost:8888/'
    """
    out = []
    port_option = f"-p {ssh_port} " if ssh_port and ssh_port != 22 else ""
    for user in users:
        if user.get("jupyter_port") is None:
            continue
        name, port = user["name"], int(user["jupyter_port"])
        if anaconda:
            unit = f"provision-jupyter-{name}"
            state = "enabled: runs at boot" if user.get("jupyter_service") else f"start it: sudo systemctl start {unit}"
            start = f"her server: systemd unit {unit} ({state})"
        else:
            start = f"start it as {name} with `jupyter server` (jupyter-server must be in her environment)"
        if listen == "all":
            text = f"{name}: open https://{login}:{port}/ (TLS, password); {start}"
        else:
            tunnel = f"ssh -N -L {port}:{jupyter_socket(name)} {port_option}{name}@{login}"
            text = f"{name}: {tunnel}  then open https://localhost:{port}/; {start}"
        out.append(SummaryLine("jupyter", host, text))
    return out


def write_markers(exports: list[str], marker_name: str, token: str, nonce: str = "") -> str:
    """The server's script: the marker created in each export with noclobber (``set -C``: refused,
    never overwritten, where that name exists), a frame ``made INDEX`` for each one created."""
    lines = [frame_setup(nonce or new_nonce())]
    for index, path in enumerate(exports):
        marker = _q(f"{check_export_path(path)}/{marker_name}")
        lines.append(
            # 0644 from its creation (umask): a chmod after it would follow a link a user with write
            # access to the export swapped in at that name (e.g. to /etc/shadow).
            f"if (umask 022; set -C; printf '%s' {_q(token)} >{marker}) 2>&1; then {frame_line('made', index)}; "
            f"else echo {_q(f'{path}/{marker_name} exists or cannot be created')}; exit 1; fi"
        )
    return "\n".join(lines) + "\n"


def made_markers(stdout: str, exports: list[str], marker_name: str, nonce: str) -> list[str]:
    """The markers the server's script (run with ``nonce``) says it created (only those are
    removed afterwards); a frame it cannot print (another label, an unknown index) is not believed."""
    made = {f.numbers[0] for f in split_frames(stdout, nonce) if f.label == "made" and len(f.numbers) == 1}
    return [f"{path}/{marker_name}" for index, path in enumerate(exports) if index in made]


def _said(stdout: str, nonce: str) -> str:
    """What the server's script printed besides its frames (why a marker could not be made)."""
    frames = f"@@{nonce}@@ "
    return "; ".join(line for line in stdout.splitlines()[-20:] if line and not line.startswith(frames))


def _users(ctx: dict) -> list[dict]:
    return [u for u in (ctx.get("cluster_users") or []) if isinstance(u, dict) and u.get("state", "present") != "absent"]


def _not_checked(runs: dict, healthy: dict, variables: dict, exports: list, server: Any, wanted) -> list[SummaryLine]:
    """One line per host of the run that stopped, naming the checks it would have had and why
    they were not made (a failed node is never silently left out of the summary)."""
    lines = []
    for name, run in runs.items():
        if name in healthy or name not in variables:
            continue
        ctx, users = variables[name], _users(variables[name])
        checks = []
        if exports and wanted("nfs") and name != server:
            checks.append("its dataset paths (NFS)")
        if wanted("anaconda") and ctx.get("anaconda") and any(u.get("conda_clone") for u in users):
            checks.append("the conda clones")
        if wanted("jupyter") and any(u.get("jupyter_port") is not None for u in users):
            checks.append("Jupyter access")
        if checks:
            why = run.stop_reason() if hasattr(run, "stop_reason") else "failed"
            lines.append(SummaryLine("verify", name, f"not checked: {', '.join(checks)}: {name} {why}", False, False))
    return lines


def role_summary(
    runs: dict[str, Any], variables: dict[str, dict], forks: int, password: str | None = None, roles: frozenset | None = None
) -> list[SummaryLine]:
    """Summary lines for every healthy host. ``runs``: host -> HostRun (open session, registered
    results); ``variables``: host -> its variables; ``roles``: the --tags of the run (None: all)."""

    def wanted(role: str) -> bool:
        return roles is None or role in roles

    healthy = {n: r for n, r in runs.items() if not r.failed and not r.unreachable}
    any_vars = next(iter(variables.values()), {})
    server = any_vars.get("nfs_server")
    exports = [check_export_path(e["path"]) for e in (any_vars.get("nfs_exports") or []) if isinstance(e, dict) and "path" in e]
    token = secrets.token_hex(16) if server in healthy and exports and wanted("nfs") else None
    marker_name = f"{MARKER}.{secrets.token_hex(8)}"
    made: list[str] = []
    lines: list[SummaryLine] = []
    if exports and wanted("nfs") and server in runs and server not in healthy:
        why = runs[server].stop_reason() if hasattr(runs[server], "stop_reason") else "failed"
        lines.append(
            SummaryLine(
                "nfs", server, f"not checked: the NFS server {why}, so no node's dataset paths were verified", False, False
            )
        )
    lines += _not_checked(runs, healthy, variables, exports, server, wanted)
    if not healthy:
        return lines
    server_address = None
    if token:
        run = healthy[server]
        kind = (run.registered.get("nfs_kind") or {}).get("server")
        label = {
            "kernel": "the kernel's NFS server (exportfs)",
            "ganesha": "nfs-ganesha (userspace NFSv4; the kernel cannot serve NFS here)",
        }
        lines.append(SummaryLine("nfs", server, f"NFS server: {label.get(kind, 'unknown')}; exports {', '.join(exports)}"))
        server_address = variables[server].get("nfs_server_address") or next(iter(verified_addresses(run)), None)
        nonce = new_nonce()
        try:
            script = write_markers(exports, marker_name, token, nonce)
            done = run.session.run(remote_command(True), stdin_for(script, True, password))
            made = made_markers(done.stdout, exports, marker_name, nonce)
            if done.exit_code != 0:
                said = _said(done.stdout, nonce)
                lines.append(SummaryLine("nfs", server, f"could not write the marker: {printable(said[-200:], 200)}", False))
                token = None
        except HostFailure as failure:
            lines.append(SummaryLine("nfs", server, f"could not write the marker: {failure}", False))
            token = None

    def one(name: str) -> list[SummaryLine]:
        run = healthy[name]
        ctx = variables[name]
        users = [u for u in (ctx.get("cluster_users") or []) if isinstance(u, dict)]
        prefixes = [a["prefix"] for a in (ctx.get("anaconda") or []) if isinstance(a, dict) and a.get("prefix")]
        clones = (
            [(u["name"], clone_name(p)) for u in users if u.get("conda_clone") for p in prefixes] if wanted("anaconda") else []
        )
        paths = exports if token and name != server else []
        out: list[SummaryLine] = []
        if paths or clones:
            nonce = new_nonce()
            script = node_script(paths, server_address, token, clones, marker_name, nonce)
            try:
                done = run.session.run(remote_command(True), stdin_for(script, True, password))
                nfs, du = parse_node(done.stdout, nonce, paths, clones)
            except HostFailure as failure:
                return [SummaryLine("summary", name, f"unreachable: {failure}", False)]
            except ParseError as error:
                return [SummaryLine("summary", name, printable(str(error), 300), False)]
            mounts = {
                r.get("path"): r for r in (run.registered.get("nfs_mounts") or {}).get("results", []) if isinstance(r, dict)
            }
            for path in paths:
                how, read = nfs.get(path, ("none", ""))
                out.append(nfs_verdict(name, path, how, read, token, list((mounts.get(path) or {}).get("missing") or [])))
            for user, env in clones:
                size = du.get((user, env), "absent")
                out.append(
                    SummaryLine(
                        "anaconda",
                        name,
                        f"{user}: ~/.conda/envs/{env} " + (f"{size} MB" if is_number(size) else "absent"),
                        is_number(size),
                    )
                )
        if wanted("jupyter"):
            inventory_host = getattr(run, "host", None)
            address = getattr(inventory_host, "address", None) or name
            listen = str(ctx.get("jupyter_listen") or "localhost")
            out += jupyter_lines(name, address, users, listen, ctx.get("anaconda"), getattr(inventory_host, "port", None))
        return out

    for per_host in fan_out(list(healthy), one, forks, workers=1):  # the sessions are this process's
        lines.extend(per_host)
    if made:
        cleanup = "\n".join(f"rm -f -- {_q(marker)}" for marker in made)
        with contextlib.suppress(HostFailure):  # the marker is harmless if it stays
            healthy[server].session.run(remote_command(True), stdin_for(cleanup + "\n", True, password))
    return lines
