"""SSH trust: a user's key pair, authorized keys, and known host keys in a managed block."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from provision.errors import ArgumentError
from provision.inventory.model import check_user
from provision.operations.authorized_keys import own_keys, set_own_keys
from provision.operations.base import UNKNOWN, Arg, Operation, OperationError, Run, StateKey, check_path, quote, shell_path
from provision.operations.files import content_changes, edit_block
from provision.text import shown_value

KEY_LINE = re.compile(
    r"^(?:(?P<opts>\S+) )?(?P<type>(?:ssh|ecdsa|sk)-[a-z0-9@.-]+) (?P<blob>[A-Za-z0-9+/]+={0,3})(?: (?P<comment>[^\n]*))?\Z"
)
NAME = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,252}|\[[0-9A-Za-z.:-]+\]:\d+|[0-9A-Fa-f:.]+)\Z")


def _key_path(args: dict) -> str:
    user = check_user(args["user"])
    return check_path(args.get("path") or f"~{user}/.ssh/id_ed25519")


def _keypair_requests(args: dict) -> list[StateKey]:
    path = _key_path(args)
    # The private key is only stat-ed (never read: it must not leave the node); the public key is read.
    return [StateKey("user", args["user"]), StateKey("stat", path), StateKey("file", path + ".pub")]


def plan_keypair(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Generate an ed25519 key pair without passphrase (as files owned by the user, 600/644,
    in a 700 folder) when the private key is absent; an existing key is kept, unless ``rotate``
    (a new pair replaces it; the old private key is not kept: rotation is for a key to revoke)."""
    user, path = args["user"], _key_path(args)
    entry = current.get(StateKey("user", user))
    if entry is None:
        raise OperationError(f"ssh_keypair: user {user} does not exist")
    private, public = current.get(StateKey("stat", path)), current.get(StateKey("file", path + ".pub"))
    owner = quote(f"{user}:{entry.gid}")
    word, pub = shell_path(path), shell_path(path + ".pub")
    folder = shell_path(path.rpartition("/")[0])
    rotate = bool(args.get("rotate"))
    if private is None or rotate:
        # Without rotate, a key that appeared since the facts were read (another node writing a
        # shared /home) is kept: only an absent key is generated.
        keep = "" if rotate else f"[ ! -e {word} ] || exit 0; "
        command = (
            f"{keep}install -d -m 700 -o {quote(user)} -g {entry.gid} {folder} && "
            f"d=$(mktemp -d {folder}/.provision-key.XXXXXX) && "
            f'ssh-keygen -q -t ed25519 -N \'\' -C {quote(user)}@"$(hostname)" -f "$d/k" && '
            f'chown -h {owner} "$d/k" "$d/k.pub" && chmod 600 "$d/k" && chmod 644 "$d/k.pub" && '
            f'mv -f "$d/k.pub" {pub} && mv -f "$d/k" {word} && rmdir "$d"'
        )
        effects = (
            (StateKey("stat", path), UNKNOWN),
            (StateKey("file", path), UNKNOWN),
            (StateKey("file", path + ".pub"), UNKNOWN),
        )
        verb = "rotate" if private is not None else "generate"
        return [Run(command, f"{verb} ssh key {path}", effects, (path.rpartition("/")[0],))]
    if private.kind != "f":
        raise OperationError(f"ssh_keypair: {path} is not a file")
    if public is None:
        command = (
            f't=$(mktemp {folder}/.provision-key.XXXXXX) && ssh-keygen -y -f {word} >"$t" && '
            f'chown -h {owner} "$t" && chmod 644 "$t" && mv -f "$t" {pub}'
        )
        return [Run(command, f"derive {path}.pub", ((StateKey("file", path + ".pub"), UNKNOWN),), (path.rpartition("/")[0],))]
    return []


def keypair_result(args: dict, current: Mapping[StateKey, Any]) -> dict:
    """What ``register:`` records: the public key line (None when not readable, e.g. in --check)."""
    state = current.get(StateKey("file", _key_path(args) + ".pub"))
    if state is None or state is UNKNOWN or state.content is None:
        return {"public_key": None, "user": args["user"]}
    # The node's file is hostile input: keep only "type blob comment" (no options), a safe comment.
    match = KEY_LINE.match(state.content.decode(errors="replace").strip())
    if not match or match.group("opts"):
        return {"public_key": None, "user": args["user"], "error": "public key file is not one plain key line"}
    comment = re.sub(r"[^A-Za-z0-9@._-]", "", match.group("comment") or "")[:64]
    return {
        "public_key": f"{match.group('type')} {match.group('blob')}" + (f" {comment}" if comment else ""),
        "user": args["user"],
    }


def parse_key(line: str) -> tuple[str, str]:
    """(type, base64 blob) of an authorized_keys/public key line, or ArgumentError."""
    match = KEY_LINE.match(line.strip())
    if not match:
        raise ArgumentError(f"not an SSH public key line: {shown_value(line.strip()[:60])}")
    return match.group("type"), match.group("blob")


def _auth_path(args: dict) -> str:
    return check_path(args.get("path") or f"~{check_user(args['user'])}/.ssh/authorized_keys")


def _auth_requests(args: dict) -> list[StateKey]:
    own_keys(args["own_keys"], args["own_keys_file"], args["base_dir"])  # bad input before any host
    return [StateKey("user", check_user(args["user"])), StateKey("file", _auth_path(args))]


def add_keys(text: str, keys: list[str]) -> str:
    """Pure: append each key whose (type, blob) is not already in ``text``; other lines kept."""
    present = set()
    for line in text.splitlines():
        match = KEY_LINE.match(line.strip())
        if match:
            present.add((match.group("type"), match.group("blob")))
    added = []
    for key in keys:
        identity = parse_key(key)
        if identity not in present:
            present.add(identity)
            added.append(key.strip())
    if not added:
        return text
    if text and not text.endswith("\n"):
        text += "\n"
    return text + "".join(line + "\n" for line in added)


MARK = re.compile(r" provision-node=(?P<node>[A-Za-z0-9._-]+)\Z")


def managed_line(key: str, node: str) -> str:
    """A key line provision manages for ``node``: ``type blob comment provision-node=NODE``."""
    parse_key(key)
    return f"{MARK.sub('', key.strip())} provision-node={node}"


PENDING = "pending"  # node_keys: this run makes the node's key pair; its public key is not known yet (--check)


def set_node_keys(text: str, node_keys: Mapping[str, list | str | None]) -> str:
    """Pure: the managed lines of ``text`` made ``node_keys`` ({node: keys}): a node's lines
    replaced by its keys, kept as they are when its keys are None (nothing known of it now),
    removed when the node is not in the mapping (it left the inventory). Lines without the
    mark are the user's and kept, except a plain copy of a managed key (adopted: marked now);
    a key the user wrote with options (``from=...``) is not added again without them. A node's
    keys :data:`PENDING` (``--check``: made in this run, not known yet) keep its lines and add
    a line that says so, so that the change is foreseen (and shown by ``--diff``)."""
    user_lines, kept = [], {}
    for line in text.splitlines():
        mark = MARK.search(line)
        if mark:
            node = mark.group("node")
            if node in node_keys and node_keys[node] in (None, PENDING):
                kept.setdefault(node, []).append(line)
            continue
        user_lines.append(line)
    for node, keys in node_keys.items():
        if keys == PENDING:
            kept.setdefault(node, []).append(f"# (the key pair made on {node} in this run: its public key) provision-node={node}")
    wanted = {}
    for node, keys in node_keys.items():
        for key in keys if isinstance(keys, list) else []:
            wanted.setdefault(parse_key(key), (node, key))
    lines = []
    for line in user_lines:
        match = KEY_LINE.match(line.strip())
        identity = (match.group("type"), match.group("blob")) if match else None
        if identity in wanted and not match.group("opts"):
            continue  # a plain copy of a managed key: written again below, marked
        if identity in wanted:
            wanted.pop(identity)  # the user's own line with options wins
        lines.append(line)
    by_node: dict[str, list[str]] = {}
    for node, key in wanted.values():
        by_node.setdefault(node, []).append(managed_line(key, node))
    for node in sorted(set(by_node) | set(kept)):
        lines += kept.get(node, []) + by_node.get(node, [])
    return "".join(line + "\n" for line in lines)


def _check_node_keys(value: Any) -> dict:
    if not isinstance(value, dict):
        raise ArgumentError("authorized_key: node_keys is a mapping {inventory host: [keys] or null}")
    for node, keys in value.items():
        if not isinstance(node, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", node):
            raise ArgumentError(f"authorized_key: {shown_value(node)} is not an inventory host name")
        if keys == PENDING:
            continue
        if keys is not None and (not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)):
            raise ArgumentError(f"authorized_key: keys of {node} must be a list of key lines or null")
        for key in keys or []:
            parse_key(key)
    return value


def plan_authorized_key(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Every key in ``keys`` in the user's authorized_keys once (never duplicated); with
    ``node_keys``, the lines provision manages per node made exactly those (see
    :func:`set_node_keys`); with ``own_keys``/``own_keys_file``, her own marked lines made exactly
    those (:func:`provision.operations.authorized_keys.set_own_keys`); other lines kept; 600. An
    absent user with nothing to add is nothing to do (its keys were revoked with it)."""
    user, path = args["user"], _auth_path(args)
    keys = args["keys"] or []
    keys = [keys] if isinstance(keys, str) else [k for k in keys if k]
    for key in keys:
        parse_key(key)
    node_keys = _check_node_keys(args["node_keys"]) if args["node_keys"] is not None else None
    entry = current.get(StateKey("user", user))
    if entry is None:
        if not keys and node_keys == {}:  # a departed user's keys revoked: gone with the account
            return []
        raise OperationError(f"authorized_key: user {user} does not exist")
    state = current.get(StateKey("file", path))
    if state is not None and (state.kind != "f" or state.content is None):
        raise OperationError(f"authorized_key: {path} is not a readable file")
    text = state.content.decode(errors="replace") if state else ""
    own = own_keys(args["own_keys"], args["own_keys_file"], args["base_dir"])
    new = set_own_keys(text, own) if own is not None else text  # hers first: node lines stay last, as set_node_keys puts them
    new = set_node_keys(new, node_keys) if node_keys is not None else new
    new = add_keys(new, keys)
    return content_changes(path, new.encode(), {"owner": user, "group": None, "mode": 0o600}, state)


def _entry_node(entry: dict) -> str:
    return str(entry.get("node") or (entry.get("names") or [""])[0])


def known_hosts_block(entries: list, current: str = "") -> str:
    """The managed block's text: one ``name1,name2 type blob`` line per host key, the first
    name the inventory host's. An entry whose ``keys`` is None (nothing known of that host
    now) keeps its lines from ``current`` (the block as it is); a host in no entry (it left
    the inventory) loses its lines."""
    present: dict[str, list[str]] = {}
    for line in current.splitlines():
        names = line.split(" ", 1)[0]
        if names and not line.startswith("#"):
            present.setdefault(names.split(",")[0], []).append(line)
    lines = []
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) - {"names", "keys", "node"}:
            raise ArgumentError("known_hosts: each entry is {node?, names: [...], keys: [...] or null}")
        names = [str(n) for n in entry.get("names") or []]
        bad = [n for n in names if not NAME.match(n)]
        if bad or not names:
            raise ArgumentError(f"known_hosts: {shown_value(bad[0] if bad else 'no names')} is not a host name or address")
        node = _entry_node(entry)
        unique = list(dict.fromkeys([node, *names]))
        if entry.get("keys") is None:
            lines += present.get(node, [])
            continue
        for key in entry["keys"]:
            kind, blob = parse_key(key)
            lines.append(f"{','.join(unique)} {kind} {blob}")
    return "\n".join(lines)


_BLOCK = "# {mark} provision known hosts"


def _block_text(text: str) -> str:
    """The lines inside the managed block (as :func:`edit_block` finds it), or ""."""
    lines = text.splitlines()
    begin, end = _BLOCK.format(mark="BEGIN"), _BLOCK.format(mark="END")
    if begin not in lines or end not in lines[lines.index(begin) :]:
        return ""
    start = lines.index(begin)
    return "\n".join(lines[start + 1 : lines.index(end, start)])


def plan_known_hosts(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Host keys for every name a node is reached by, in a managed block of a known_hosts file."""
    path = check_path(args["path"])
    state = current.get(StateKey("file", path))
    if state is not None and (state.kind != "f" or state.content is None):
        raise OperationError(f"known_hosts: {path} is not a readable file")
    text = state.content.decode(errors="replace") if state else ""
    block = known_hosts_block(args["entries"], _block_text(text))
    new = edit_block(text, block, _BLOCK)
    if new == text:
        return []
    return content_changes(path, new.encode(), {"mode": 0o644}, state)


OPERATIONS = {
    "ssh_keypair": Operation(
        "ssh_keypair",
        {
            "user": Arg((str,), True, help="whose key pair (made as that user, on the node)"),
            "path": Arg((str,), help="private key path (default ~USER/.ssh/id_ed25519)"),
            "rotate": Arg((bool,), default=False, help="replace the key pair"),
        },
        _keypair_requests,
        plan_keypair,
        result=keypair_result,
        result_requests=lambda a: [StateKey("file", _key_path(a) + ".pub")],
        doc="an ed25519 key pair for a user, kept when present",
    ),
    "authorized_key": Operation(
        "authorized_key",
        {
            "user": Arg((str,), True, help="whose authorized_keys (changed as that user)"),
            "keys": Arg((str, list), help="keys to add (kept when the user removes none)"),
            "node_keys": Arg((dict,), help="{inventory host: [keys] or null}: the lines provision manages per node"),
            "path": Arg((str,), help="the file (default ~USER/.ssh/authorized_keys)"),
            "own_keys": Arg(
                (list,), help="the person's own key lines (options allowed), marked provision-own-key: exactly these kept"
            ),
            "own_keys_file": Arg((str,), help="a controller file of her own key lines (authorized_keys format)"),
            "base_dir": Arg((str,), help="folder a relative own_keys_file is read from (the inventory's)"),
        },
        _auth_requests,
        plan_authorized_key,
        doc="public keys in a user's authorized_keys",
    ),
    "known_hosts": Operation(
        "known_hosts",
        {
            "entries": Arg((list,), True, help="known_hosts lines: every inventory node's host keys under its names"),
            "path": Arg((str,), default="/etc/ssh/ssh_known_hosts", help="the file that gets the managed block"),
        },
        lambda a: [StateKey("file", check_path(a["path"]))],
        plan_known_hosts,
        doc="host keys in a managed block of known_hosts",
    ),
}
