"""File operations: directory, file content (and templates, rendered before), line, block, download;
a file provision wrote, removed (file_absent)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from provision.errors import ArgumentError
from provision.inventory.model import check_user
from provision.operations.base import (
    REFUSED_KINDS,
    Arg,
    FileState,
    Operation,
    OperationError,
    Run,
    StateKey,
    Write,
    check_path,
    parent_of,
    parse_mode,
    quote,
    shell_path,
)
from provision.operations.platform import OS, alternatives, for_node, per_family
from provision.text import printable, shown_value

_OWNERSHIP = {
    "owner": Arg((str,), help="user that owns it"),
    "group": Arg((str,), help="group that owns it"),
    "mode": Arg((str, int), help="octal mode, e.g. '0644'"),
}


def _common(args: dict) -> dict:
    args = dict(args)
    args["path"] = check_path(args["path"])
    if args.get("owner") is not None:
        check_user(args["owner"], "owner")
    if args.get("group") is not None:
        check_user(args["group"], "group")
    args["mode"] = parse_mode(args.get("mode"))
    return args


def _file_request(args: dict) -> list[StateKey]:
    return [StateKey("file", check_path(args["path"]))]


def _fix_attributes(path: str, state: FileState, args: dict, as_owner: str | None = None) -> list[Run]:
    """chown/chmod where the existing path's owner, group or mode differ from the arguments
    (``as_owner``: run as that user, the name's owner, where root must not act on it)."""
    commands, what = [], []
    owner, group, mode = args.get("owner"), args.get("group"), args.get("mode")
    run = f"runuser -u {quote(as_owner)} -- " if as_owner else ""
    if (owner and owner != state.owner) or (group and group != state.group):
        spec = (owner or state.owner) + (f":{group}" if group else "")
        commands.append(f"{run}chown -h {quote(':' + group if as_owner and group else spec)} {shell_path(path)}")
        what.append(f"owner {spec}")
    if mode is not None and mode != state.mode:
        commands.append(f"{run}chmod {mode:04o} {shell_path(path)}")
        what.append(f"mode {mode:04o}")
    if not commands:
        return []
    new = FileState(
        state.kind,
        mode if mode is not None else state.mode,
        owner or state.owner,
        group or state.group,
        state.sha256,
        state.content,
    )
    return [Run(" && ".join(commands), f"{path}: {', '.join(what)}", ((StateKey("file", path), new),), (path,))]


def plan_directory(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Create the folder (with parents) when absent; fix owner/group/mode when they differ.

    The folder itself is made by a plain ``mkdir`` (it fails on anything already there, a link
    included), then its owner is set on the folder just made. A folder another (non-root) user
    owns is never taken over: refused. In a sticky folder every user can write (``/scratch``
    1777) the name is made only when absent, and a folder there that its wanted owner already
    has is fixed as that owner (``runuser``: she may swap her own name for a link; root never
    acts on it).

    >>> plan_directory({"path": "/scratch/alice", "owner": "alice", "group": None, "mode": "0700"},
    ...                {StateKey("file", "/scratch/alice"): FileState("s", 0o1777, below="/scratch", mine=True)})[0].command
    'mkdir -m 0700 -- /scratch/alice && chown -h alice /scratch/alice'
    """
    args = _common(args)
    path = args["path"]
    state = current.get(StateKey("file", path))
    sticky = isinstance(state, FileState) and state.kind == "s"
    if sticky:
        state = state.entry  # the name itself, in its sticky folder (None: absent)
    if state is None:
        word = shell_path(path)
        mode = args["mode"] if args["mode"] is not None else 0o755
        command = f"mkdir -m {mode:04o} -- {word}"
        if not sticky and parent_of(path) != "/":  # the folders above: in folders only root (or the reader) can write
            command = f"mkdir -p -- {shell_path(parent_of(path))} && {command}"
        if args["owner"] or args["group"]:
            command += f" && chown -h {quote((args['owner'] or 'root') + (':' + args['group'] if args['group'] else ''))} {word}"
        new = FileState("d", mode, args["owner"] or "root", args["group"] or "root")
        return [Run(command, f"create folder {path}", ((StateKey("file", path), new),), (path,))]
    if state.kind in REFUSED_KINDS:
        raise OperationError(f"{path} {REFUSED_KINDS[state.kind]}: refused")
    if state.kind != "d":
        raise OperationError(f"{path} exists and is not a folder")
    wanted = args["owner"]
    if (state.owner != "root" and wanted and wanted != state.owner) or (sticky and state.owner not in ("root", wanted)):
        raise OperationError(
            f"{path} is {printable(state.owner, 40)}'s folder, not {wanted or 'root'}'s: refused "
            "(provision never takes over a folder another user made: move it away, then run again)"
        )
    return _fix_attributes(path, state, args, state.owner if sticky and state.owner != "root" else None)


def content_changes(path: str, content: bytes, args: dict, state: FileState | None, secret: bool = False) -> list:
    """The changes that make ``path`` hold ``content`` with the requested attributes."""
    if state is not None and state.kind != "f":
        raise OperationError(f"{path} exists and is not a regular file")
    digest = hashlib.sha256(content).hexdigest()
    if state is not None and state.sha256 == digest:
        return _fix_attributes(path, state, args)
    owner = args.get("owner") or (state.owner if state else None)
    group = args.get("group") or (state.group if state else None)
    # A new secret is 0600 unless told otherwise; an existing file keeps its mode.
    mode = args.get("mode") if args.get("mode") is not None else (state.mode if state else (0o600 if secret else 0o644))
    verb = "update" if state is not None else "create"
    return [Write(path, content, owner, group, mode, state.content if state else None, f"{verb} {path}", secret)]


def plan_file(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Make the file hold exactly ``content`` (written atomically, the old one kept as a backup)."""
    args = _common(args)
    content = args["content"]
    data = content.encode() if isinstance(content, str) else bytes(content)
    return content_changes(args["path"], data, args, current.get(StateKey("file", args["path"])), bool(args.get("secret")))


def _current_text(path: str, state: FileState | None, create: bool) -> str:
    if state is None:
        if not create:
            # Issue 34: a role's user cannot set the task's create (the Slurm role's message told her
            # to "set create: true", an option she has nowhere): say what the task needs instead.
            raise OperationError(f"{path} does not exist: this task edits an existing file and never creates it")
        return ""
    if state.kind != "f":
        raise OperationError(f"{path} is not a regular file")
    if state.content is None:
        raise OperationError(f"{path} is too large to edit line by line")
    try:
        return state.content.decode()
    except UnicodeDecodeError:
        raise OperationError(f"{path} is not UTF-8 text") from None


def edit_line(text: str, line: str, regexp: str | None, present: bool) -> str:
    """Pure line edit: ensure ``line`` is present (replacing the last line matching ``regexp``,
    else appending) or absent (removing lines equal to it or matching ``regexp``)."""
    lines = text.splitlines()
    pattern = re.compile(regexp) if regexp else None
    if present:
        matches = [i for i, old in enumerate(lines) if (pattern.search(old) if pattern else old == line)]
        if matches:
            lines[matches[-1]] = line
        else:
            lines.append(line)
    else:
        lines = [old for old in lines if not (old == line or (pattern and pattern.search(old)))]
    return "\n".join(lines) + ("\n" if lines else "")


def plan_line(args: dict, current: Mapping[StateKey, Any]) -> list:
    """One line in a file, other lines untouched."""
    args = _common(args)
    if "\n" in args["line"]:
        raise ArgumentError(f"line: the line for {args['path']} may not contain a newline")
    if args["regexp"]:
        try:
            re.compile(args["regexp"])
        except re.error as error:
            raise ArgumentError(f"line: bad regexp {shown_value(args['regexp'])}: {error}") from None
    state = current.get(StateKey("file", args["path"]))
    present = args["state"] == "present"
    if state is None and not present:
        return []
    text = _current_text(args["path"], state, args["create"])
    new = edit_line(text, args["line"], args["regexp"], present)
    if state is not None and new == text:
        return _fix_attributes(args["path"], state, args)
    return content_changes(args["path"], new.encode(), args, state)


def edit_block(text: str, block: str, marker: str) -> str:
    """Pure block edit: replace the lines between ``marker`` BEGIN/END (inclusive) with the block,
    or append it; other lines untouched. An empty ``block`` removes the managed block."""
    begin, end = marker.replace("{mark}", "BEGIN"), marker.replace("{mark}", "END")
    lines = text.splitlines()
    body = block.splitlines()
    managed = [begin, *body, end] if block else []
    if begin in lines and end in lines[lines.index(begin) :]:
        start = lines.index(begin)
        stop = lines.index(end, start)
        lines[start : stop + 1] = managed
    else:
        lines.extend(managed)
    return "\n".join(lines) + ("\n" if lines else "")


def plan_marked_block(operation: str, edit, args: dict, current: Mapping[StateKey, Any]) -> list:
    """A block between marker lines, put in place by ``edit(text, block, marker)``; the rest of
    the file untouched. Shared by ``block`` (where it is, else at the end) and ``block_top``."""
    args = _common(args)
    if "{mark}" not in args["marker"] or "\n" in args["marker"]:
        raise ArgumentError(f"{operation}: marker must be one line containing {{mark}}")
    state = current.get(StateKey("file", args["path"]))
    text = _current_text(args["path"], state, args.get("create", True))
    new = edit(text, args["block"], args["marker"])
    if state is not None and new == text:
        return _fix_attributes(args["path"], state, args)
    return content_changes(args["path"], new.encode(), args, state)


def plan_block(args: dict, current: Mapping[StateKey, Any]) -> list:
    """A marked block of lines in a file, replaced as a whole; lines outside it untouched."""
    return plan_marked_block("block", edit_block, args, current)


def edit_block_top(text: str, block: str, marker: str) -> str:
    """Like :func:`edit_block`, but a new block goes first in the file (before any early return,
    as in Debian's /etc/bash.bashrc, which returns at once for non-interactive shells)."""
    begin = marker.replace("{mark}", "BEGIN")
    if begin in text.splitlines():
        return edit_block(text, block, marker)
    end = marker.replace("{mark}", "END")
    return "\n".join([begin, *block.splitlines(), end]) + "\n" + text


def plan_block_top(args: dict, current: Mapping[StateKey, Any]) -> list:
    """A marked block at the top of a file, replaced as a whole; other lines untouched. The path
    may be one per OS family (``{debian: /etc/bash.bashrc, rhel: /etc/bashrc}``)."""
    return plan_marked_block("block_top", edit_block_top, {**args, "path": for_node(args["path"], current, "block_top")}, current)


def _block_top_requests(args: dict) -> list[StateKey]:
    paths = alternatives(args["path"], "block_top")
    return [StateKey("file", check_path(p)) for p in paths] + ([OS] if per_family(args["path"]) else [])


_URL = re.compile(r"^(https?|ftp)://[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+\Z")


def plan_download(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Fetch ``url`` to ``path`` when the file's sha256 is not the required one; the download is
    checked before it replaces anything (temp file in the same folder, then rename)."""
    args = _common(args)
    url, digest = args["url"], args["sha256"].lower()
    if not _URL.match(url):
        raise ArgumentError(f"download: {shown_value(url)} is not an http(s)/ftp URL")
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ArgumentError(f"download: sha256 {shown_value(args['sha256'])} is not 64 hex digits")
    path = args["path"]
    state = current.get(StateKey("file", path))
    if state is not None and state.sha256 == digest:
        return _fix_attributes(path, state, args)
    word, folder = shell_path(path), shell_path(parent_of(path))
    mode = args["mode"] if args["mode"] is not None else 0o644
    owner = (args["owner"] or "root") + (f":{args['group']}" if args["group"] else "")
    command = (
        f"t=$(mktemp {folder}/.provision-dl.XXXXXX) && "
        f'{{ if command -v curl >/dev/null; then curl -fsSL -o "$t" {quote(url)}; else wget -q -O "$t" {quote(url)}; fi; }} && '
        f'got=$(sha256sum <"$t" | cut -c1-64) && '
        f'if [ "$got" != {digest} ]; then rm -f "$t"; echo "sha256 mismatch: got $got" >&2; false; '
        f'else chmod {mode:04o} "$t" && chown -h {quote(owner)} "$t" && mv -f "$t" {word}; fi'
    )
    new = FileState("f", mode, args["owner"] or "root", args["group"] or "root", digest, None)
    return [Run(command, f"download {url} to {path}", ((StateKey("file", path), new),), (path,))]


_PATH = {"path": Arg((str,), True, help="remote path (absolute or ~user/...)")}
HEADER_BYTES = 512  # where a file provision wrote says so (its first lines)


def plan_file_absent(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Remove a file provision wrote itself (a role's file that another setting replaced): only a
    regular file whose first lines hold ``marker``; an absent file, or one without the marker
    (someone else's under that name), is left as it is. A link, a foreign hard link or a path
    below a folder a user can write is refused before this (``Operation.decide``); ``rm`` would
    remove a link itself, never what it points to, should one appear in between.

    >>> state = FileState("f", content=b"# written by provision setup-cluster\\n")
    >>> [change.command for change in plan_file_absent({"path": "/etc/x", "marker": "written by provision"},
    ...                                                 {StateKey("file", "/etc/x"): state})]
    ['rm -f -- /etc/x']
    """
    path, marker = check_path(args["path"]), args["marker"]
    if not marker.strip():
        raise ArgumentError("file_absent: marker must be some text of the file's header")
    state = current.get(StateKey("file", path))
    if state is None or state.kind != "f" or state.content is None:
        return []  # absent, or no file of provision's (a folder, a device, a file over the read limit)
    if marker.encode() not in state.content[:HEADER_BYTES]:
        return []  # not written by provision: its owner's
    return [Run(f"rm -f -- {shell_path(path)}", f"remove {path}", ((StateKey("file", path), None),), (path,))]


_BLOCK_ARGS = {
    **_PATH,
    **_OWNERSHIP,
    "block": Arg((str,), True, help="the lines between the markers"),
    "marker": Arg((str,), default="# {mark} provision managed block", help="marker line; {mark} becomes BEGIN and END"),
    "create": Arg((bool,), default=True, help="create the file when it is missing (false: refuse)"),
}

OPERATIONS = {
    "directory": Operation(
        "directory",
        {**_PATH, **_OWNERSHIP},
        _file_request,
        plan_directory,
        doc="a folder with owner, group, mode",
        sticky="self",
    ),
    "file": Operation(
        "file",
        {
            **_PATH,
            **_OWNERSHIP,
            "content": Arg((str,), True, help="the whole file"),
            "secret": Arg(
                (bool,), default=False, help="a new file is 0600 unless mode says otherwise; --diff does not show its content"
            ),
        },
        _file_request,
        plan_file,
        doc="a file with exactly this content",
        sticky="own",
    ),
    "line": Operation(
        "line",
        {
            **_PATH,
            **_OWNERSHIP,
            "line": Arg((str,), True, help="the line, exactly"),
            "regexp": Arg((str,), help="the last line matching it is replaced by line; with state absent, matching lines go"),
            "state": Arg((str,), default="present", help="present or absent"),
            "create": Arg((bool,), default=False, help="create the file when it is missing (false: refuse)"),
        },
        _file_request,
        plan_line,
        doc="one line in a file",
        sticky="own",
    ),
    "block": Operation("block", _BLOCK_ARGS, _file_request, plan_block, doc="a marked block in a file", sticky="own"),
    "block_top": Operation(
        "block_top",
        {**_BLOCK_ARGS, "path": Arg((str, dict), True, help="remote path, or one per OS family")},
        _block_top_requests,
        plan_block_top,
        doc="a marked block at the top of a file",
        sticky="own",
    ),
    "file_absent": Operation(
        "file_absent",
        {
            **_PATH,
            "marker": Arg((str,), True, help="text in the file's first lines that says provision wrote it"),
        },
        _file_request,
        plan_file_absent,
        doc="no file provision wrote at the path (one without the marker is left alone)",
    ),
    "download": Operation(
        "download",
        {
            **_PATH,
            **_OWNERSHIP,
            "url": Arg((str,), True, help="http(s) URL, fetched by the node"),
            "sha256": Arg((str,), True, help="required: the file's sha256, checked before it is kept"),
        },
        _file_request,
        plan_download,
        doc="a file fetched from a URL, checked by sha256",
    ),
}
