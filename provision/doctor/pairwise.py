"""The step only nodes can do: every node SSHes, as the job user, to every peer under the names a
rank file uses (``BatchMode=yes``: a missing key or an unknown host key fails, never prompts),
and resolves every name, all nodes at once: about N connections per node, not N² from here.

Each successful session also reports the memlock and open-file limits the peer's sshd gave the
job user: exactly what orted and the ranks inherit there. Peer names are inventory names
(checked by the inventory) passed as arguments; the output is hostile input, parsed strictly.
"""

from __future__ import annotations

import contextlib
import math
import re
import shlex

from provision import defaults
from provision.doctor.model import FAIL, PASS, WARN, CheckResult, Limits, NodeReport
from provision.doctor.sources import _limit
from provision.errors import ParseError
from provision.text import shown_value
from provision.transport.frames import frame_record, frame_setup, split_frames

PARALLEL = defaults.PAIRWISE_FANOUT  # ssh clients at once on each node, by default (see the script)

# $1: this node's name; then its peers, in peer_order. PARALLEL workers (doctor
# --pairwise-fanout), each taking every PARALLEL-th peer in turn (a slow peer holds up one
# worker, not a batch). Since each node starts with the peers after it, every sshd sees about
# PARALLEL handshakes at once, not one from every node: under OpenSSH's default MaxStartups
# (10:30:100), which drops connections above 10.
# A client whose default key exchange is sntrup761x25519 (OpenSSH 9.0 to 9.8; its key generation
# costs the client ~5x a whole curve25519 login) is told to prefer curve25519-sha256, with every
# default algorithm behind it ("^": a peer without curve25519 still negotiates): the host key,
# the login and BatchMode are checked exactly as before, the session carries no secret. Each
# record is a frame of transport/frames.py and its line, printed by one printf (one write, whole
# on the pipe the workers share); no tr, cut or subshell per peer beyond getent and ssh. The
# remote command runs in the peer's login shell (any shell, csh too). A pair
# that times out or is dropped before the login (a busy sshd: MaxStartups, a loaded node) is
# tried once more, at once; what the second attempt says is what is reported.
_SCRIPT = """\
{frame_setup}
self=$1; shift
set -f
kex=
case $(ssh -Q kex 2>/dev/null) in
  *mlkem768x25519*) ;;
  *sntrup761x25519-sha512*) kex="-o KexAlgorithms=^curve25519-sha256" ;;
esac
first() {{ w=${{1:--}}; }}
flat() {{ w="$*"; }}
try() {{
  a=$(getent hosts "$1" 2>/dev/null); first $a; a=$w
  if [ "$1" = "$self" ]; then {resolved}; return; fi
  for attempt in 1 2; do
    out=$(ssh -n -o BatchMode=yes -o ConnectTimeout={timeout} $kex "$1" \\
      "sh -c 'echo doctor-limits \\$(ulimit -l) \\$(ulimit -n)'" 2>&1); rc=$?
    case $rc:$out in
      255:*"timed out"*|255:*"reset by peer"*|255:*"closed by remote host"*|255:*"No route to host"*) ;;
      *) break ;;
    esac
  done
  flat $out
  {resolved}
  {tried}
}}
worker() {{
  k=$1; shift; i=0
  for n in "$@"; do
    [ $((i % {parallel})) -eq "$k" ] && try "$n"
    i=$((i + 1))
  done
  return 0
}}
try "$self"
k=0
while [ $k -lt {parallel} ]; do worker $k "$@" & k=$((k + 1)); done
wait
"""


def pairwise_script(nonce: str, parallel: int = PARALLEL, connect_timeout: float = 10) -> str:
    """The sh script (stdin of :func:`pairwise_command`) for one node: ``parallel`` ssh clients
    at once, each connection given ``connect_timeout`` seconds (whole seconds for ssh, at least 1)."""
    return _SCRIPT.format(
        frame_setup=frame_setup(nonce),
        resolved=frame_record("resolve", body="%s %s", words=('"$1"', '"$a"')),
        tried=frame_record("ssh", '"$rc"', body="%s %.300s", words=('"$1"', '"$w"')),
        timeout=max(1, math.ceil(connect_timeout)),
        parallel=int(parallel),
    )


def peer_order(me: str, names: list[str]) -> list[str]:
    """The peers ``me`` tries, starting after itself in ``names`` and wrapping round, so that at
    any moment each peer is tried by a few nodes, not by all of them."""
    if me not in names:
        return list(names)
    at = names.index(me)
    return names[at + 1 :] + names[:at]


def pairwise_command(me: str, peers: list[str], login_user: str, login_uid: int | None, job_user: str) -> str:
    """``sh -s -- ME PEER...``, as the job user: directly when we log in as it, through
    ``runuser`` as root, else ``sudo -n`` (which fails, naming why, without a rule for it)."""
    args = " ".join(shlex.quote(name) for name in [me, *peers])
    if not job_user or job_user == login_user:
        return f"sh -s -- {args}"
    if login_uid == 0:
        return f"runuser -u {shlex.quote(job_user)} -- sh -s -- {args}"
    return f"sudo -n -u {shlex.quote(job_user)} -- sh -s -- {args}"


_LIMITS = re.compile(r"doctor-limits (\S+) (\S+)")
# ssh's own line, "Warning: Permanently added 'node2,10.0.0.2' (ED25519) to the list of known hosts.",
# matched by its shape: each try stops at the first quote, so a node's line of a thousand such
# openings is read in linear time (a lazy scan to "known hosts" retried from each one is quadratic).
_NOISE = re.compile(r"Warning: Permanently added '[^'\n]{1,1024}' \([^()\n]{1,32}\) to the list of known hosts\.\s*")


def parse_pairwise(text: str, nonce: str, names: set[str]) -> tuple[dict[str, str], dict[str, Limits], dict[str, str]]:
    """``(pairwise, peer limits, resolved)`` from the script's frames (``resolve``: ``NAME ADDRESS``;
    ``ssh RC``: ``PEER WHAT IT SAID``); records about names not asked for are ignored, a frame the
    script cannot print is refused (:class:`ParseError`: a node that forged one). pairwise: peer ->
    "" when it connected, else the first words of why not."""
    pairwise: dict[str, str] = {}
    limits: dict[str, Limits] = {}
    resolved: dict[str, str] = {}
    for frame in split_frames(text, nonce):
        line = frame.body.partition("\n")[0]
        if frame.label == "resolve" and not frame.numbers:
            fields = line.split()
            if len(fields) == 2 and fields[0] in names:
                resolved[fields[0]] = "" if fields[1] == "-" else fields[1][:64]
        elif frame.label == "ssh" and len(frame.numbers) == 1:
            peer, _, said = line.partition(" ")
            code = frame.numbers[0]
            if peer not in names:
                continue
            match = _LIMITS.search(said)
            if code == 0 and match:
                pairwise[peer] = ""
                with contextlib.suppress(ParseError):  # a peer that prints nonsense: its limits stay unknown
                    limits[peer] = Limits(_limit(match.group(1), "pairwise"), _limit(match.group(2), "pairwise"))
            else:
                why = _NOISE.sub("", said).strip() or f"ssh exit {code}"
                pairwise[peer] = why[:120]
        else:
            raise ParseError("pairwise", f"unexpected frame {shown_value(frame.label[:60])} (hostile or corrupt output)")
    return pairwise, limits, resolved


def _shown(pairs: list[str], limit: int = 8) -> str:
    return ", ".join(pairs[:limit]) + (f" and {len(pairs) - limit} more" if len(pairs) > limit else "")


def check_pairwise(reports: list[NodeReport], user: str) -> CheckResult:
    """Check 2: every ordered pair of reached nodes connects as the job user, no prompt."""
    name = "pairwise ssh"
    reached = [r for r in reports if r.ok and r.job_ids is not None]
    names = [r.host for r in reached]
    if len(reached) < 2:
        without = [r.host for r in reports if r.ok and r.job_ids is None]
        if without:  # pairs exist but none could be tried: not a pass (reach + job user says why)
            return CheckResult(name, WARN, tuple(without), f"not tried: no user {user} on {', '.join(without)}")
        return CheckResult(name, PASS, (), "fewer than two reachable nodes with the job user: no pair to try")
    failing: list[tuple[str, str, str]] = []
    for report in reached:
        for peer in names:
            if peer == report.host:
                continue
            why = report.pairwise.get(peer, "not tried (the node did not report it)")
            if why:
                failing.append((report.host, peer, why))
    if not failing:
        pairs = len(names) * (len(names) - 1)
        return CheckResult(name, PASS, (), f"all {pairs} ordered pairs connect as {user} with BatchMode=yes")
    total = len(names) - 1
    sources = {s for s, _, _ in failing}
    from_all = sorted(s for s in sources if sum(1 for f in failing if f[0] == s) == total)
    to_all = sorted(t for t in names if sum(1 for f in failing if f[1] == t) == total)
    at_fault = from_all + [t for t in to_all if t not in from_all]
    if not at_fault:
        at_fault = sorted(sources)
    reasons = sorted({why for _, _, why in failing})
    detail = (
        f"{len(failing)} of {len(names) * total} pairs fail as {user}: "
        + _shown([f"{s}->{t}" for s, t, _ in failing])
        + f" ({'; '.join(reasons[:3])})"
    )
    if from_all:
        detail += f"; {', '.join(from_all)} reach no peer (the job user's key or known_hosts there?)"
    if to_all:
        detail += f"; no node reaches {', '.join(to_all)} (authorized_keys or sshd there?)"
    nodes = dict.fromkeys(from_all, "reaches no peer") | {t: "no peer reaches it" for t in to_all if t not in from_all}
    if not nodes:  # no node stands out: each one with a failing pair, its pairs
        nodes = {s: "cannot reach " + _shown([t for f, t, _ in failing if f == s]) for s in at_fault}
    return CheckResult(name, FAIL, tuple(at_fault), detail, nodes=nodes)
