"""``sysctl``: a kernel parameter set now and at every boot (Ansible's ``sysctl``, pyinfra's
``server.sysctl``), e.g. the socket buffers NCCL's socket transport and IPoIB want::

    - name: socket buffers for NCCL
      sysctl: {name: net.core.rmem_max, value: 16777216}

The key's line ``KEY = VALUE`` goes in ``/etc/sysctl.d/<file>.conf`` (default ``99-provision``:
systemd-sysctl reads the files in lexical order and the last setting wins, sysctl.d(5)); other
lines of that file are kept, a second line for the key is dropped. The live value is written to
``/proc/sys`` (what ``sysctl -w`` does, without needing procps). Nothing is done when both the
file and the live value match (values compared field by field, as ``sysctl -p`` does).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from provision.errors import ArgumentError
from provision.facts.sysctl import check_key, normalise, proc_path
from provision.operations.base import Arg, FileState, Operation, OperationError, Run, StateKey, quote
from provision.operations.files import content_changes
from provision.text import shown_value

_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_VALUE = re.compile(r"[\x20-\x7e\t]{1,4096}")


def _checked(args: dict) -> tuple[str, str, str]:
    """``(key, value, conf path)`` from the task's arguments, each checked (bad input otherwise)."""
    try:
        key = check_key(args["name"])
    except ValueError as error:
        raise ArgumentError(f"sysctl: {error}") from None
    value = str(args["value"]) if not isinstance(args["value"], bool) else ""
    if not _VALUE.fullmatch(value) or not value.strip():
        raise ArgumentError(f"sysctl {key}: value {shown_value(str(args['value'])[:80])} must be printable text on one line")
    if not _FILE.fullmatch(args["file"]) or args["file"].endswith(".conf"):
        raise ArgumentError(f"sysctl: file {shown_value(args['file'][:80])} must be a plain name (the .conf is added)")
    return key, normalise(value), f"/etc/sysctl.d/{args['file']}.conf"


def _requests(args: dict) -> list[StateKey]:
    key, _value, path = _checked(args)
    return [StateKey("sysctl", key), StateKey("file", path)]


def with_setting(text: str, key: str, value: str) -> str:
    """``text`` (a sysctl.d file) with ``key = value``: its first line for the key replaced, any
    later one dropped (it would win), or the line appended."""
    line = f"{key} = {value}"
    pattern = re.compile(rf"-?\s*{re.escape(key)}\s*=.*")
    out, found = [], False
    for current in text.splitlines():
        if pattern.fullmatch(current.strip()):
            if not found:
                out.append(line)
            found = True
            continue
        out.append(current)
    if not found:
        out.append(line)
    return "\n".join(out) + "\n"


def plan_sysctl(args: dict, current: Mapping[StateKey, Any]) -> list:
    """Write the key's line in its sysctl.d file when it differs, then the live value when it
    differs (a key the kernel does not have fails the host: a typo is not persisted). A link or a
    path below a user's folder is refused before (:meth:`Operation.decide`)."""
    key, value, path = _checked(args)
    live = current.get(StateKey("sysctl", key))
    if live is None:
        raise OperationError(f"sysctl: this kernel has no key {key} ({proc_path(key)})")
    state = current.get(StateKey("file", path))
    if isinstance(state, FileState) and state.kind == "f" and state.content is None:
        raise OperationError(f"sysctl: {path} is too large to read")
    old = state.content if isinstance(state, FileState) and state.content is not None else b""
    new = with_setting(old.decode("utf-8", "replace"), key, value).encode()
    changes = content_changes(path, new, {}, state) if new != old else []
    if live != value:
        command = f"printf '%s\\n' {quote(value)} >{quote(proc_path(key))}"
        changes.append(Run(command, f"sysctl {key} = {value} (was {live})", ((StateKey("sysctl", key), value),), ()))
    return changes


OPERATIONS = {
    "sysctl": Operation(
        "sysctl",
        {
            "name": Arg((str,), True, help="the key, e.g. net.core.rmem_max"),
            "value": Arg((str, int), True, help="its value (fields separated by spaces)"),
            "file": Arg((str,), default="99-provision", help="the /etc/sysctl.d/<file>.conf that keeps it"),
        },
        _requests,
        plan_sysctl,
        doc="a kernel parameter, set now and in /etc/sysctl.d",
    ),
}
