"""Verification of passwordless SSH: from every node, as each user, to every other node with
``BatchMode=yes`` (no password, no prompt; host keys checked). Nodes in parallel, each node's
attempts in parallel, one round trip per node."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from provision.engine.script import remote_command, stdin_for
from provision.inventory.model import check_user
from provision.text import is_number, shown_value
from provision.transport.options import HostFailure
from provision.transport.parallel import fan_out

_PEER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")


@dataclass(frozen=True)
class PairResult:
    """One attempt: ``user`` on ``source`` ran ``ssh target true``."""

    source: str
    user: str
    target: str
    ok: bool
    message: str = ""
    checked: bool = True  # False: a node of the pair failed in the run, so it was not tried (``message`` says why)


def verify_script(users: list[str], peers: dict[str, str], timeout: int = 10, pairs: set[tuple[str, str]] | None = None) -> str:
    """The script a node runs (as root): ``runuser -u USER -- ssh -o BatchMode=yes PEER true`` for
    every user and peer (or only the (user, peer) ``pairs``), in parallel; prints ``USER PEER
    CODE`` lines. ``peers``: name -> address."""
    lines = ["set -u"]
    for user in users:
        check_user(user)
        for name, address in peers.items():
            if pairs is not None and (user, name) not in pairs:
                continue
            if not _PEER.match(address) or not _PEER.match(name):
                raise ValueError(f"peer {shown_value(name)} ({shown_value(address)}) is not a host name")
            lines.append(
                f"( runuser -u {shlex.quote(user)} -- ssh -n -o BatchMode=yes -o ConnectTimeout={timeout} "
                f"-o StrictHostKeyChecking=yes {shlex.quote(address)} true >/dev/null 2>&1; "
                f"echo {shlex.quote(user)} {shlex.quote(name)} $? ) &"
            )
    lines.append("wait")
    return "\n".join(lines) + "\n"


def parse_verify(text: str, users: list[str], peers: dict[str, str]) -> dict[tuple[str, str], int]:
    """``(user, peer) -> exit code`` from the script's output; unexpected lines are ignored."""
    codes = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in users and parts[1] in peers and is_number(parts[2]):
            codes[(parts[0], parts[1])] = int(parts[2])
    return codes


def verify_pairs(
    sessions: dict[str, Any],
    peer_names: dict[str, str],
    users: list[str] | dict[str, list[str]],
    forks: int,
    password: str | None = None,
) -> list[PairResult]:
    """Every ordered pair of nodes, as each user. ``sessions``: node -> open session;
    ``peer_names``: node -> the name other nodes reach it by (its host name); ``users``: the
    cluster users of every node, or node -> its own (a pair is checked for the users both have)."""
    users_of = users if isinstance(users, dict) else {node: list(users) for node in peer_names}

    def one(source: str) -> list[PairResult]:
        peers = {name: address for name, address in peer_names.items() if name != source}
        wanted = [(user, peer) for user in users_of.get(source, []) for peer in peers if user in users_of.get(peer, ())]
        if not wanted:
            return []
        script = verify_script(list(dict.fromkeys(u for u, _ in wanted)), peers, pairs=set(wanted))
        try:
            result = sessions[source].run(remote_command(True), stdin_for(script, True, password))
        except HostFailure as failure:
            return [PairResult(source, u, p, False, f"{source} {failure.kind}") for u, p in wanted]
        codes = parse_verify(result.stdout, [u for u, _ in wanted], peers)
        out = []
        for user, peer in wanted:
            code = codes.get((user, peer))
            message = "" if code == 0 else ("no answer" if code is None else f"ssh exit {code}")
            out.append(PairResult(source, user, peer, code == 0, message))
        return out

    results = fan_out(list(sessions), one, forks, workers=1)  # the sessions are this process's
    return [pair for per_node in results for pair in per_node]


def unchecked_pairs(users: dict[str, list[str]], stopped: dict[str, str]) -> list[PairResult]:
    """The ordered pairs of the run's nodes (``users``: node -> its cluster users) that were not
    tried because a node of the pair stopped (``stopped``: node -> why), each saying so: a failed
    node is never silently left out of the count.

    >>> [(p.source, p.target, p.message) for p in unchecked_pairs({"a": ["u"], "b": ["u"]}, {"b": "failed at task 'x'"})]
    [('a', 'b', "not checked: b failed at task 'x'"), ('b', 'a', "not checked: b failed at task 'x'")]
    """
    out = []
    for source, names in users.items():
        for target, theirs in users.items():
            if target == source or (source not in stopped and target not in stopped):
                continue
            why = source if source in stopped else target
            for user in names:
                if user in theirs:
                    out.append(PairResult(source, user, target, False, f"not checked: {why} {stopped[why]}", checked=False))
    return out
