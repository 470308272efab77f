"""The operation contract (pyinfra's): arguments + the host's current state -> the changes to make.

An operation never touches a host. It declares the facts it needs (:class:`StateKey` values),
and its ``plan`` is a pure function of its arguments and those facts that returns a list of
:class:`Run` or :class:`Write` changes; an empty list means ``ok`` (nothing to do). The engine
reads the facts (one framed round trip per host), calls ``plan`` and applies the changes.

Remote paths are absolute (``/etc/x``) or relative to a user's home (``~alice/.ssh/x``); they
are checked here and always quoted (:func:`shell_path`), never passed raw to a shell.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from provision.errors import ArgumentError, ProvisionError
from provision.text import is_number, printable, shown_value

PACKAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_:-]{0,127}\Z")
SERVICE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.@_:-]{0,127}\Z")
_HOME_PATH = re.compile(r"^~([A-Za-z_][A-Za-z0-9._-]{0,31})(/.*)?\Z")
UNKNOWN = object()  # a fact value a change made unknowable (read again, or unknown in --check)


class OperationError(ProvisionError):
    """The operation cannot proceed on this host (e.g. a user exists with another uid)."""


@dataclass(frozen=True)
class StateKey:
    """One piece of host state: ``kind`` (file, user, group, uid, gid, package, pkgmgr, command,
    service, systemd, hostinfo; ``stat``: a file's metadata without its content), its
    argument (a path, a name, a command...) and, for ``command``, who runs it: ``root``, a user
    name (become_user), or "" for the login user."""

    kind: str
    arg: str = ""
    user: str = ""


@dataclass(frozen=True)
class FileState:
    """A path on the host: kind ``f`` (file) or ``d`` (directory) or ``o`` (other), mode, owner,
    group, sha256 and content (None for folders and for files over the read limit).

    Kinds that no operation acts on (:data:`REFUSED_KINDS`): ``l`` a symbolic link (never
    followed), ``h`` a hard link to a file the reading user does not own, ``u`` a path below a
    folder another user can write (``below`` names that folder; owner/group/mode are its), ``s``
    a name in a sticky folder every user can write (``/tmp``-like; ``below`` names it, ``entry``
    is the name's own state or None when absent, ``mine`` whether it is absent or the reader's
    own): only operations that say so act there (:func:`refuse_unsafe_paths`); ``r`` a path whose
    walk met a name that kept changing while it was read (``below`` names it)."""

    kind: str = "f"
    mode: int = 0o644
    owner: str = "root"
    group: str = "root"
    sha256: str | None = None  # computed from the content when only that is given
    content: bytes | None = None
    below: str | None = None
    entry: FileState | bool | None = None  # a sticky folder's name: its own state (an ``exists`` fact: True), or None
    mine: bool = False
    acl: bool = False  # ``u``: an ACL lets others write the folder (its mode's group bits are the ACL's mask)

    def __post_init__(self) -> None:
        if self.content is not None and self.sha256 is None:
            object.__setattr__(self, "sha256", hashlib.sha256(self.content).hexdigest())


# Why each refused kind is refused: root never acts through what a user controls.
REFUSED_KINDS = {
    "l": "is a symbolic link (provision never follows a link)",
    "h": "is a hard link to a file its user does not own",
    "u": "is below a folder another user can write",
    "s": "is in a folder every user can write",
    "r": "could not be checked",
}
# Why a path could not be walked (a FileState "r"'s owner field, as the node's walk says it).
UNWALKED = {
    "changed": "a name on its way changed while it was read, run again",
    "links": "it leads through more than 40 links, or a link with a control character",
    "long": "it leads through more than 64 names, or a name over 1024 bytes",
}


@dataclass(frozen=True)
class UserEntry:
    """A passwd entry plus the user's supplementary groups."""

    name: str
    uid: int
    gid: int
    home: str
    shell: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupEntry:
    """A group entry."""

    name: str
    gid: int


@dataclass(frozen=True)
class ServiceState:
    """``systemctl is-active`` / ``is-enabled`` of a unit (``unknown`` when it does not exist), and
    whether systemd holds an older copy of its unit file (``NeedDaemonReload``)."""

    active: str
    enabled: str
    need_reload: bool = False


@dataclass(frozen=True)
class Run:
    """A shell command to run (already safely quoted). ``effects`` states the facts it sets
    exactly (value, or :data:`UNKNOWN`: altered, value not known); ``touches`` the paths it may
    alter, or None: it may alter anything, so every other fact is read again before it is used."""

    command: str
    describe: str
    effects: tuple[tuple[StateKey, Any], ...] = ()
    touches: tuple[str, ...] | None = None
    timeout: float | None = None  # seconds this change may run (None: the run's --command-timeout)
    uploads: tuple[Upload, ...] = ()  # controller files sent (SFTP) before the round trip that runs it


@dataclass(frozen=True)
class Upload:
    """A controller file a :class:`Run` needs on the node: sent over SFTP (streamed) into a private
    folder before the round trip, named by its sha256; the command finds it at
    ``"$PROVISION_UPLOADS/<sha256>"`` and checks that sha256 on the node before using it."""

    local: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Write:
    """Write ``content`` to ``path`` atomically (temp file + rename in the same folder, owner,
    group and mode set before the rename, the previous file kept as ``PATH.provision~``)."""

    path: str
    content: bytes
    owner: str | None = None
    group: str | None = None
    mode: int | None = None
    old: bytes | None = None  # for --diff
    describe: str = ""
    secret: bool = False  # never shown by --diff (unless ``mask`` says which lines to hide)
    mask: Callable[[str], str] | None = field(default=None, compare=False)  # secret: --diff shows mask(text)

    @property
    def effects(self) -> tuple[tuple[StateKey, Any], ...]:
        """The file fact after the write."""
        state = FileState(
            "f",
            self.mode if self.mode is not None else (0o600 if self.secret else 0o644),
            self.owner or "root",
            self.group or "root",
            content=self.content,
        )
        return ((StateKey("file", self.path), state),)


Change = Run | Write


# An argument's types as a playbook's author reads them (YAML's words, not Python's class names).
_TYPE_WORDS = {str: "text", int: "a whole number", float: "a number", bool: "true or false", list: "a list", dict: "a mapping"}


@dataclass(frozen=True)
class Arg:
    """An argument: its Python type(s), whether required, its default and a one-line help."""

    types: tuple[type, ...]
    required: bool = False
    default: Any = None
    help: str = ""


@dataclass(frozen=True)
class Operation:
    """One operation: its argument spec, the facts it needs, and its pure planner."""

    name: str
    args: Mapping[str, Arg]
    requests: Callable[[dict], list[StateKey]]
    plan: Callable[[dict, Mapping[StateKey, Any]], list[Change]]
    result: Callable[[dict, Mapping[StateKey, Any]], dict] | None = None
    result_requests: Callable[[dict], list[StateKey]] | None = None
    doc: str = field(default="")
    # In a sticky folder every user can write (/tmp): None, refused; "own", planned on the name
    # when it is absent or the reader's own (changes that only write by rename, never through a
    # name another user may plant); "self", the operation is given the sticky state to decide.
    sticky: str | None = None

    def decide(self, args: dict, current: Mapping[StateKey, Any]) -> list[Change]:
        """:meth:`plan`, after refusing every path fact that is a link, a foreign hard link or
        below a folder another user can write (:func:`refuse_unsafe_paths`)."""
        return self.plan(args, refuse_unsafe_paths(current, self.sticky))

    def check_args(self, raw: Mapping[str, Any]) -> dict:
        """Validate ``raw`` against the spec: unknown/missing names and wrong types raise
        :class:`ArgumentError` listing the valid ones; returns the args with defaults filled."""
        unknown = sorted(set(raw) - set(self.args))
        if unknown:
            raise ArgumentError(
                f"{self.name}: unknown argument {shown_value(unknown[0])} (valid: {', '.join(sorted(self.args))})"
            )
        checked = {}
        for name, spec in self.args.items():
            if name not in raw or raw[name] is None:
                if spec.required:
                    raise ArgumentError(
                        f"{self.name}: missing argument {shown_value(name)} (valid: {', '.join(sorted(self.args))})"
                    )
                checked[name] = spec.default
                continue
            value = raw[name]
            if int in spec.types and str not in spec.types and is_number(value):
                value = int(value)
            if (
                bool in spec.types
                and str not in spec.types
                and isinstance(value, str)
                and value.lower() in ("true", "false", "yes", "no")
            ):
                value = value.lower() in ("true", "yes")
            if not isinstance(value, spec.types) or (isinstance(value, bool) and bool not in spec.types):
                wanted = " or ".join(_TYPE_WORDS.get(t, t.__name__) for t in spec.types)
                raise ArgumentError(f"{self.name}: argument {shown_value(name)} must be {wanted}, got {shown_value(value)}")
            checked[name] = value
        return checked


def refuse_unsafe_paths(current: Mapping[StateKey, Any], sticky: str | None = None) -> Mapping[StateKey, Any]:
    """The one rule for paths a user controls, as operations see it: a path fact of a refused
    kind (:data:`REFUSED_KINDS`) fails the host with one line naming the path and why. A name in
    a sticky folder (``s``) is given as it is (``sticky="self"``), as its own state when absent
    or the reader's own (``sticky="own"``), else refused. Returns the facts to plan on."""
    given = dict(current)
    for key, state in current.items():
        if not isinstance(state, FileState) or state.kind not in REFUSED_KINDS:  # only a path's fact is a FileState
            continue
        if state.kind == "s" and sticky == "self":
            continue
        if state.kind == "s" and sticky == "own" and state.mine:
            given[key] = state.entry
            continue
        why = REFUSED_KINDS[state.kind]
        if state.kind == "r":
            why += f": {UNWALKED.get(state.owner, 'the walk of its folders failed')} ({printable(state.below or '?', 200)})"
        if state.kind in "us":
            folder = printable(state.below or "?", 200)
            sticky_bit = ", sticky" if state.kind == "s" else ""
            acl = " and an ACL" if state.acl else ""
            why += f" ({folder}, owner {printable(state.owner, 40)}, mode {state.mode:04o}{acl}{sticky_bit})"
        if state.kind == "s" and not state.mine:
            owner = getattr(state.entry, "owner", None)
            whose = f"{printable(owner, 40)}'s" if owner else "another user's"
            if getattr(state.entry, "kind", "") in ("h", "l"):  # a name there anyone may have made
                whose = "a link" if state.entry.kind == "l" else "a file with other names (a hard link)"
            why += f" and is {whose}, not the reader's own"
        raise OperationError(f"{key.arg} {why}: refused")
    return given


# A setting: a key (a run of word characters and dots, from its start) then ``=`` or ``:`` and a
# value on the same line. A key naming a secret has its value masked to the end of its line (a
# multi-word secret is hidden whole). Each key is tried once, from its first character, and each
# line end is found once, so masking is linear in the text: a user's 100 KB line of ``password``
# must not hold every host's --diff for minutes (issue 24, finding 5).
_SETTING = re.compile(r"(?<![\w.])[\w.]+[^\S\r\n]*[=:][^\S\r\n]*(?=\S)")
_SECRET_KEY = re.compile(r"pass|secret|token|private", re.IGNORECASE)  # password, passwd, hashed_password...
_LINE_END = re.compile(r"[\r\n]|\Z")
_PRIVATE_BEGIN = re.compile(r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----")
_PRIVATE_END = re.compile(r"-----END [A-Z ]{0,40}PRIVATE KEY-----")


def _hide_private_keys(text: str) -> str:
    """Each private key block replaced by a note; one without its END line is hidden to the end."""
    out, position = [], 0
    while begin := _PRIVATE_BEGIN.search(text, position):
        out.append(text[position : begin.start()] + "(private key hidden)")
        end = _PRIVATE_END.search(text, begin.end())
        position = end.end() if end else len(text)
    return "".join(out) + text[position:]


def mask_secrets(text: str) -> str:
    """Hide values of password/secret/token-like settings and private key blocks."""
    text = _hide_private_keys(text)
    out, position = [], 0
    for setting in _SETTING.finditer(text):
        if setting.start() < position or not _SECRET_KEY.search(setting.group()):
            continue  # inside a value already hidden, or no secret
        end = _LINE_END.search(text, setting.end())
        out.append(text[position : setting.end()] + "********")
        position = end.start() if end else len(text)
    return "".join(out) + text[position:]


def check_path(path: Any) -> str:
    """A safe remote path (absolute, or ``~user/...``), normalised; else :class:`ArgumentError`."""
    # isprintable: no C0/C1 control, DEL, bidi or zero-width format character, line separator,
    # non-ASCII space or undecodable byte (a surrogate) reaches a node's file names
    if not isinstance(path, str) or not path or not path.isprintable():
        raise ArgumentError(f"path {shown_value(path)} is empty or holds control or invisible characters")
    if not (path.startswith("/") or _HOME_PATH.match(path)):
        raise ArgumentError(f"path {shown_value(path)} must be absolute or start with ~user/")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ArgumentError(f"path {shown_value(path)} may not contain '..'")
    if len(path.encode()) > 4095 or any(len(part.encode()) > 255 for part in parts):  # PATH_MAX, NAME_MAX
        shown_path = shown_value(path if len(path) <= 80 else path[:80] + "...")
        raise ArgumentError(f"path {shown_path} is longer than a path (4095 bytes) or one of its names (255) can be")
    normal = "/".join(parts)
    return normal if path.startswith("~") else "/" + normal


def parse_mode(mode: Any) -> int | None:
    """``"0600"``, ``"600"`` or 0o600 -> 0o600; None stays None."""
    if mode is None:
        return None
    if isinstance(mode, int) and not isinstance(mode, bool):
        if 0 <= mode <= 0o7777:
            return mode
    elif isinstance(mode, str) and re.fullmatch(r"0?[0-7]{3,4}", mode):
        return int(mode, 8)
    raise ArgumentError(f"mode {shown_value(mode)} is not an octal mode such as '0644'")


def split_home(path: str) -> tuple[str | None, str]:
    """``~alice/.ssh`` -> ("alice", ".ssh"); ``/etc/x`` -> (None, "/etc/x")."""
    match = _HOME_PATH.match(path)
    if not match:
        return None, path
    return match.group(1), (match.group(2) or "").lstrip("/")


def shell_path(path: str) -> str:
    """The shell word for a checked path; ``~user/x`` becomes ``"${H_<hex user>}"/'x'``.

    Scripts set that variable first (:func:`home_prelude`), failing when the user is absent.
    """
    user, rest = split_home(path)
    if user is None:
        return shlex.quote(path)
    return '"${' + home_var(user) + '}"' + (f"/{shlex.quote(rest)}" if rest else "")


def home_var(user: str) -> str:
    """The shell variable a script sets to ``user``'s home before using ``~user/`` paths."""
    return "H_" + user.encode().hex()


HOME_VAR = re.compile(r"\$\{H_([0-9a-f]+)\}")


def home_prelude(script: str) -> str:
    """Lines that set every home variable ``script`` uses (from getent), failing the step with a
    clear message when the user does not exist, so no command ever runs on a wrong path."""
    lines = []
    for hexname in sorted(set(HOME_VAR.findall(script))):
        user = bytes.fromhex(hexname).decode()
        lines.append(
            f"H_{hexname}=$(getent passwd {shlex.quote(user)} | cut -d: -f6); "
            f"[ -n \"$H_{hexname}\" ] || {{ echo 'no such user: {user}' >&2; exit 91; }}"
        )
    return "\n".join(lines)


def parent_of(path: str) -> str:
    """The parent folder of a checked path."""
    head, _, _ = path.rpartition("/")
    return head or "/"


def quote(value: Any) -> str:
    """``shlex.quote`` of ``str(value)``."""
    return shlex.quote(str(value))
