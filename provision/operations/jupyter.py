"""Jupyter Server 2 for each cluster user, secure by default.

- ``jupyter_ports``: checks the users' ports before any command runs on a host (two users with one
  port on a node is bad input) and, with ``listen: all``, on each host, that no other user's
  process listens on a user's port (the port is named in the error).
- Where her server listens (issue 33 finding 4): with the default ``listen: localhost``, on a Unix
  socket (``c.ServerApp.sock``, mode 0600) in ``/var/lib/provision-jupyter/NAME/``, a folder only
  she can enter (:func:`provision.templating.filters.jupyter_socket`): a TCP port on localhost was
  free to any user of the node while her server was down, to serve a look-alike login page
  behind her ``ssh -L`` tunnel. Her tunnel forwards a port of her own machine to the socket
  (``ssh -N -L 8888:/var/lib/provision-jupyter/alice/jupyter.sock alice@node``). With ``listen:
  all`` it is a TCP port on every interface, which any user can take while her server is down:
  there only the certificate tells her server apart, so ``all`` needs her ``jupyter_certfile`` and
  ``jupyter_keyfile`` (a certificate her browser verifies), never the self-signed default.
- ``jupyter_config``: ``~USER/.jupyter/jupyter_server_config.py`` rendered from the template
  ``jupyter_server_config.py.j2`` with a password hashed **on the controller** with argon2 in
  Jupyter Server's ``argon2:`` format (``jupyter_server.auth.security.passwd``). The password is
  read from a file on the controller (or asked once at a prompt); it never appears in an argument, a command line, a log or
  a diff. An existing hash that still verifies the password is kept (a fresh salt would make
  every run a change), so the second run changes nothing; a hash naming argon2 parameters other
  than ours is never verified (a hostile node could name gigabytes and hours) and is replaced.
  Every string value is written as a ``tojson`` literal. The change is secret: --diff and --json
  show no part of the file. Mode 0600, the old file backed up.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from provision.errors import ArgumentError
from provision.files import read_input_text
from provision.inventory.model import check_user
from provision.operations.base import Arg, Operation, OperationError, StateKey, Write, check_path
from provision.operations.files import content_changes
from provision.templating import render_template, template_loader
from provision.templating.filters import jupyter_socket
from provision.text import is_number, shown_value

# jupyter_server.auth.security.passwd(algorithm="argon2"): argon2-cffi's PasswordHasher with these.
ARGON2_PARAMETERS = {"memory_cost": 10240, "time_cost": 10, "parallelism": 8}
# The template writes the hash as a JSON (= Python) string literal: "argon2:$argon2id$...".
_HASH_LINE = re.compile(
    r'^c\.PasswordIdentityProvider\.hashed_password[ \t]*=[ \t]*"(argon2:\$argon2[^\'\n"\\]{1,400})"[ \t]*$', re.MULTILINE
)
MAX_PASSWORD_FILE = 4096
SELF_SIGNED_CERT = "~/.jupyter/jupyter-selfsigned.crt"  # made by the role as the user when she names none
SELF_SIGNED_KEY = "~/.jupyter/jupyter-selfsigned.key"


class PasswordFileError(ArgumentError):
    """The password file cannot be read or holds no password (bad input)."""


def read_password(path: str) -> str:
    """The first line of the controller file ``path`` (stripped of its newline); the file must be
    readable and the password non-empty. The message names the file, never its content."""
    # a regular file, not a link, FIFO or device (a FIFO would hold the run forever), size capped
    text = read_input_text(path, what="jupyter password file", limit=MAX_PASSWORD_FILE, error=PasswordFileError)
    password = text.splitlines()[0] if text.splitlines() else ""
    if not password:
        raise PasswordFileError(f"jupyter password file {path}: empty (the first line is the password)")
    return password


def checked_password(user: str, password: str) -> str:
    """A password asked at the prompt for ``user``, refused when empty or more than one line. The
    run passes it to this operation as its ``password`` argument (never written or shown)."""
    if not password or "\n" in password or "\r" in password:
        raise PasswordFileError(f"jupyter password for {user}: empty or more than one line")
    return password


def password_for(args: dict) -> str:
    """The user's password: from the controller file, else the one asked at the prompt."""
    if args["password_file"]:
        return read_password(_resolve(args["password_file"], args["base_dir"]))
    if args.get("password"):
        return args["password"]
    raise PasswordFileError(f"jupyter: no password for {args['user']}: set jupyter_password_file, or run with --ask-jupyter-pass")


def hash_password(password: str) -> str:
    """``argon2:$argon2id$...``, what ``jupyter_server.auth.passwd(password)`` returns."""
    import argon2

    return "argon2:" + argon2.PasswordHasher(**ARGON2_PARAMETERS).hash(password)


def _our_parameters():
    import argon2

    hasher = argon2.PasswordHasher(**ARGON2_PARAMETERS)
    return argon2.Parameters(
        type=hasher.type,
        version=argon2.low_level.ARGON2_VERSION,
        salt_len=hasher.salt_len,
        hash_len=hasher.hash_len,
        time_cost=hasher.time_cost,
        memory_cost=hasher.memory_cost,
        parallelism=hasher.parallelism,
    )


def hash_matches(hashed: str, password: str) -> bool:
    """Whether ``hashed`` (Jupyter's ``argon2:`` format) verifies ``password``.

    The hash comes from the node (hostile): one whose argon2 parameters (memory, time, lanes,
    lengths, type, version) are not exactly the ones :func:`hash_password` writes is "no match"
    without being verified, so a node cannot make the controller spend gigabytes or hours; the
    caller then rewrites the config with a fresh hash of ours."""
    import argon2

    if not hashed.startswith("argon2:"):
        return False
    encoded = hashed[len("argon2:") :]
    try:
        if argon2.extract_parameters(encoded) != _our_parameters():
            return False
        return argon2.PasswordHasher(**ARGON2_PARAMETERS).verify(encoded, password)
    except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError, ValueError):
        return False


def existing_hash(content: bytes | None) -> str | None:
    """The hashed password of an existing config file, if it holds one in our format."""
    if not content:
        return None
    match = _HASH_LINE.search(content.decode(errors="replace"))
    return match.group(1) if match else None


def _resolve(path: str, base: str | None) -> str:
    return path if os.path.isabs(path) or not base else str(Path(base) / path)


def _users(args: dict) -> list[dict]:
    users = args["users"]
    if not isinstance(users, list) or not all(isinstance(u, dict) for u in users):
        raise ArgumentError("jupyter_ports: users must be the list cluster_users")
    return [u for u in users if u.get("jupyter_port") is not None]


def port_of(user: dict) -> int:
    """A user's ``jupyter_port``, checked (1024-65535)."""
    port = user.get("jupyter_port")
    if isinstance(port, str) and is_number(port):
        port = int(port)
    if isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65535:
        raise ArgumentError(
            f"cluster_users: jupyter_port {shown_value(port)} of {user.get('name')} must be a number from 1024 to 65535"
        )
    return port


def _check_listen(listen: Any) -> str:
    if listen not in ("localhost", "all"):
        raise ArgumentError(f"jupyter: listen must be localhost or all, not {shown_value(listen)}")
    return listen


def _ports_requests(args: dict) -> list[StateKey]:
    seen: dict[int, str] = {}
    for user in _users(args):
        name = check_user(user.get("name"))
        port = port_of(user)
        if port in seen:
            raise ArgumentError(
                f"cluster_users: {name} and {seen[port]} both have jupyter_port {port} (one port per user on a node)"
            )
        seen[port] = name
    if _check_listen(args["listen"]) == "localhost":  # her port is on her own machine; the node serves a socket
        return []
    return [StateKey("listening")] + [StateKey("user", u["name"]) for u in _users(args)]


def plan_ports(args: dict, current: Mapping[StateKey, Any]) -> list:
    """No change; fails when a user's port is taken by a process of another user on this host
    (``listen: all``: with ``localhost`` no port of the node is hers)."""
    if args["listen"] == "localhost":
        return []
    listening = current.get(StateKey("listening")) or {}
    taken = []
    for user in _users(args):
        port = port_of(user)
        entry = current.get(StateKey("user", user["name"]))
        owner = listening.get(port)
        if owner is not None and (entry is None or owner != entry.uid):
            taken.append(f"port {port} of {user['name']} is already in use (by uid {owner})")
    if taken:
        raise OperationError("; ".join(taken))
    return []


def _config_requests(args: dict) -> list[StateKey]:
    check_user(args["user"])
    password_for(args)  # bad input before any command runs on a host
    if _check_listen(args["listen"]) == "all" and not (args["certfile"] and args["keyfile"]):
        raise ArgumentError(
            f"jupyter_listen: all needs jupyter_certfile and jupyter_keyfile for {args['user']}: a certificate her "
            "browser verifies (on a TCP port any user of the node can stand in for her server while it is down, "
            "with a self-signed certificate of their own); the default, localhost, serves a socket only she can reach"
        )
    return [StateKey("file", check_path(args["path"]))]


def render_config(args: dict, hashed: str) -> str:
    """The config file's text from the template (built-in ``templates/``)."""
    env = template_loader(args["template_dirs"] or ())
    context = {
        "sock": jupyter_socket(args["user"]) if args["listen"] == "localhost" else None,
        "ip": "localhost" if args["listen"] == "localhost" else "0.0.0.0",
        "port": args["port"],
        "root_dir": args["root_dir"],
        "certfile": args["certfile"] or SELF_SIGNED_CERT,
        "keyfile": args["keyfile"] or SELF_SIGNED_KEY,
        "hashed_password": hashed,
        "user": args["user"],
    }
    return render_template(env, args["template"], context)


def plan_config(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Write the config when it differs; keep a still-valid hash so a converged host is ok."""
    path = check_path(args["path"])
    state = current.get(StateKey("file", path))
    password = password_for(args)
    hashed = existing = existing_hash(state.content if state else None)
    # No match also when the node's hash names argon2 parameters other than ours (not verified
    # then, see hash_matches): the config is rewritten with a fresh hash of ours.
    if hashed is None or not hash_matches(hashed, password):
        hashed = hash_password(password)
    content = render_config(args, hashed).encode()
    attrs = {"owner": args["user"], "group": args["group"] or args["user"], "mode": 0o600}
    # secret: --diff/--json show the config with the hash's line masked (mask_config), never the hash:
    # a template of the user's that writes it under another name (or the node's old file) is hidden whole.
    hashes = tuple(h for h in (hashed, existing) if h)
    return [
        replace(c, mask=partial(mask_config, hashes=hashes)) if isinstance(c, Write) else c
        for c in content_changes(path, content, attrs, state, secret=True)
    ]


# A setting's name says it holds a secret. The line is split at its first "=" in Python and only
# the name is searched: a pattern spanning name and value backtracked quadratically on a long line.
_SECRET_NAME = re.compile(r"passw(?:or)?d|token|secret", re.IGNORECASE)
_SETTING_NAME = re.compile(r"[\w.]+")
_NOT_SECRET = {'""', "''", "true", "false"}  # an empty or boolean value hides nothing
_HASH_MARK = "argon2:$argon2"  # how every Jupyter Server password hash starts (jupyter_server.auth.security)


def _masked_line(line: str) -> str:
    name, equals, rest = line.partition("=")
    key = name.strip(" \t")
    value = rest.lstrip(" \t")
    if not equals or not _SETTING_NAME.fullmatch(key) or not _SECRET_NAME.search(key):
        return line
    if not value or value[0].isspace() or value.rstrip(" \t").lower() in _NOT_SECRET:
        return line
    fingerprint = hashlib.sha256(value.encode()).hexdigest()[:8]
    return f"{line[: len(line) - len(value)]}(hidden, fingerprint {fingerprint})"


def mask_config(text: str, hashes: tuple[str, ...] = ()) -> str:
    """A Jupyter config as --diff shows it: every setting whose name says password, token or
    secret has its value replaced by a fingerprint (the first 8 hex digits of its SHA-256:
    enough to see that it changed, nothing to guess it from), the rest as it is. Where one of
    ``hashes``, or any argon2 hash in Jupyter's form (``argon2:$argon2...``: the node's old file
    may hold one we did not make), is still in the text after that (a template of the user's
    that names it otherwise, a comment), the whole text is hidden.

    >>> mask_config('c.ServerApp.port = 8888\\nc.PasswordIdentityProvider.hashed_password = "argon2:$x"\\n')
    'c.ServerApp.port = 8888\\nc.PasswordIdentityProvider.hashed_password = (hidden, fingerprint f43c9597)\\n'
    """
    masked = "\n".join(_masked_line(line) for line in text.split("\n"))  # lines as (?m)$ sees them
    if _HASH_MARK in masked or any(h and h in masked for h in hashes):
        return "(content hidden: secret)\n"
    return masked


OPERATIONS = {
    "jupyter_ports": Operation(
        "jupyter_ports",
        {
            "users": Arg((list,), True, help="cluster_users"),
            "listen": Arg((str,), default="localhost", help="localhost (a socket: no port on the node) or all"),
        },
        _ports_requests,
        plan_ports,
        doc="each user's Jupyter port: unique on the node and not taken by another user",
    ),
    "jupyter_config": Operation(
        "jupyter_config",
        {
            "user": Arg((str,), True, help="whose config (written as that user)"),
            "group": Arg((str,), help="the file's group"),
            "path": Arg((str,), True, help="the config file (~USER/.jupyter/jupyter_server_config.py)"),
            "port": Arg((int,), True, help="c.ServerApp.port"),
            "password_file": Arg((str,), help="controller file whose first line is the password (else --ask-jupyter-pass)"),
            "base_dir": Arg((str,), help="folder relative password files are read from"),
            "password": Arg((str,), help="the password asked at the prompt (--ask-jupyter-pass; set by the run, not a playbook)"),
            "listen": Arg(
                (str,), default="localhost", help="localhost (c.ServerApp.sock, a Unix socket only she can reach) or all"
            ),
            "root_dir": Arg((str,), True, help="c.ServerApp.root_dir"),
            "certfile": Arg((str,), help="TLS certificate on the node (default: the role's self-signed one)"),
            "keyfile": Arg((str,), help="TLS key on the node (default: the role's self-signed one)"),
            "template": Arg((str,), default="jupyter_server_config.py.j2", help="the config's template"),
            "template_dirs": Arg((list,), help="folders searched for it before the built-in templates"),
        },
        _config_requests,
        plan_config,
        doc="Jupyter Server 2 config with an argon2-hashed password",
    ),
}
