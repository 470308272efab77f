"""``pam_limits``: a resource limit of the users' login sessions (Ansible's ``pam_limits``), e.g.
the locked memory RDMA registers a job's buffers in, which doctor's limits check asks for::

    - name: memlock unlimited for every login (RDMA)
      pam_limits: {domain: "*", type: "-", item: memlock, value: unlimited}

The line ``DOMAIN TYPE ITEM VALUE`` (limits.conf(5)) goes in
``/etc/security/limits.d/<file>.conf`` (default ``90-provision``), which pam_limits reads at each
new login session (sshd with ``UsePAM yes``, Debian's and RHEL's default); sessions already open
keep their limits. Other lines of the file are kept. The line replaces the file's line for the
same domain, type and item; a ``-`` line (soft and hard at once) replaces both, and a soft or hard
line set apart from a ``-`` line keeps the other half at its old value (``-`` becomes the other
type). Nothing is written when the file already says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from provision.errors import ArgumentError
from provision.inventory.model import check_user
from provision.operations.base import Arg, FileState, Operation, OperationError, StateKey
from provision.operations.files import content_changes
from provision.text import shown_value

# limits.conf(5)'s items, as linux-pam's page lists them (modules/pam_limits/limits.conf.5.xml at
# dbd1ae9516e2): "All items support the values -1, unlimited or infinity indicating no limit,
# except for priority and nice"; nice's values are [-20,19].
ITEMS = (
    "core", "data", "fsize", "memlock", "nofile", "rss", "stack", "cpu", "nproc", "as", "maxlogins",
    "maxsyslogins", "priority", "locks", "sigpending", "msgqueue", "nice", "rtprio",
)  # fmt: skip
_NUMBERS_ONLY = ("priority", "nice")
TYPES = ("soft", "hard", "-")
_VALUE = re.compile(r"unlimited|infinity|-1|-?[0-9]{1,19}")
_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def _checked(args: dict) -> tuple[str, str, str, str, str]:
    """``(domain, type, item, value, file path)``, each checked (bad input otherwise)."""
    domain = args["domain"]
    if domain != "*":
        check_user(domain[1:] if domain.startswith("@") else domain, "pam_limits: domain")
    kind, item = args["type"], args["item"]
    if kind not in TYPES:
        raise ArgumentError(f"pam_limits: type {shown_value(kind)} is not soft, hard or - (both)")
    if item not in ITEMS:
        raise ArgumentError(f"pam_limits: item {shown_value(item)} is not one of limits.conf's ({', '.join(ITEMS)})")
    value = str(args["value"]).strip() if not isinstance(args["value"], bool) else ""
    if not _VALUE.fullmatch(value) or (item in _NUMBERS_ONLY and not re.fullmatch(r"-?[0-9]{1,3}", value)):
        raise ArgumentError(
            f"pam_limits: value {shown_value(str(args['value'])[:40])} of {item} is not "
            + ("a number (it has no unlimited)" if item in _NUMBERS_ONLY else "a number, unlimited or -1")
        )
    if item == "nice" and not -20 <= int(value) <= 19:
        raise ArgumentError(f"pam_limits: nice {value} is not from -20 to 19")
    if not _FILE.fullmatch(args["file"]) or args["file"].endswith(".conf"):
        raise ArgumentError(f"pam_limits: file {shown_value(args['file'][:80])} must be a plain name (the .conf is added)")
    return domain, kind, item, value, f"/etc/security/limits.d/{args['file']}.conf"


def _requests(args: dict) -> list[StateKey]:
    return [StateKey("file", _checked(args)[4])]


def with_limit(text: str, domain: str, kind: str, item: str, value: str) -> str:
    """``text`` (a limits.d file) saying ``domain kind item value``: a line that says so already
    kept as it is (its spacing, its comment), the other lines for that domain and item that it
    overrides dropped (a ``-`` line split so that the other type keeps its value), the new line
    where the first of them was, or appended; comments and other lines kept."""
    out: list[str] = []
    at, placed = None, False
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()  # '#' starts a comment anywhere on a line
        if len(fields) == 4 and fields[0] == domain and fields[2] == item:
            if fields[1] == kind and fields[3] == value and not placed:
                out.append(line)
                placed = True
                continue
            if kind == "-" or fields[1] == kind:
                at = len(out) if at is None else at
                continue
            if fields[1] == "-":  # it set both: the half this line does not set keeps its value
                at = len(out) if at is None else at
                out.append(f"{domain}\t{'hard' if kind == 'soft' else 'soft'}\t{item}\t{fields[3]}")
                continue
        out.append(line)
    if not placed:
        out.insert(len(out) if at is None else at, f"{domain}\t{kind}\t{item}\t{value}")
    return "\n".join(out) + "\n"


def plan_limits(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Write the limits.d file when it does not say ``domain type item value`` yet (its mode and
    owner kept; a new file 0644 root's). A link or a path below a user's folder is refused before
    (:meth:`Operation.decide`)."""
    domain, kind, item, value, path = _checked(args)
    state = current.get(StateKey("file", path))
    if isinstance(state, FileState) and (state.kind != "f" or state.content is None):
        raise OperationError(f"pam_limits: {path} is not a file provision can read")
    old = state.content.decode("utf-8", "replace") if state is not None else ""
    new = with_limit(old, domain, kind, item, value)
    return content_changes(path, new.encode(), {}, state) if new != old else []


OPERATIONS = {
    "pam_limits": Operation(
        "pam_limits",
        {
            "domain": Arg((str,), default="*", help="whose sessions: * (everyone), a user, or @group"),
            "type": Arg((str,), default="-", help="soft, hard, or - (both)"),
            "item": Arg((str,), True, help="the limit, as limits.conf names it: memlock, nofile, stack, nproc..."),
            "value": Arg((str, int), True, help="a number (KiB for memlock), unlimited, or -1"),
            "file": Arg((str,), default="90-provision", help="the /etc/security/limits.d/<file>.conf that holds it"),
        },
        _requests,
        plan_limits,
        doc="a login session's resource limit, in /etc/security/limits.d",
    ),
}
