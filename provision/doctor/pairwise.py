"""The step only nodes can do: every node SSHes, as the job user, to every peer under the names a
rank file uses (``BatchMode=yes``: a missing key or an unknown host key fails, never prompts),
and resolves every name, all nodes at once: about N connections per node, not N² from here.

Each successful session also reports the memlock and open-file limits the peer's sshd gave the
job user: exactly what orted and the ranks inherit there. Peer names are inventory names
(checked by the inventory) passed as arguments; the output is hostile input, parsed strictly.
"""

from __future__ import annotations

import contextlib
import re
import shlex

from provision.doctor.model import FAIL, PASS, WARN, CheckResult, Limits, NodeReport
from provision.doctor.sources import _limit
from provision.errors import ParseError
from provision.operations.base import is_number

PARALLEL = 16  # ssh clients at once on each node
CONNECT_TIMEOUT = 10

# $1: this node's name; then its peers. Each name in a job of its own (a slow resolver costs once per
# batch, not once per name); the remote command runs in the peer's login shell (any shell).
_SCRIPT = """\
self=$1
i=0
for n in "$@"; do
  ( a=$(getent hosts "$n" 2>/dev/null | {{ read -r a _; echo "$a"; }})
    line=$(printf '@@%s@@ resolve %s %s' '{nonce}' "$n" "${{a:--}}")
    if [ "$n" != "$self" ]; then
      out=$(ssh -n -o BatchMode=yes -o ConnectTimeout={timeout} "$n" \\
        "sh -c 'echo doctor-limits \\$(ulimit -l) \\$(ulimit -n)'" 2>&1); rc=$?
      line="$line
$(printf '@@%s@@ ssh %s %s %s' '{nonce}' "$n" "$rc" "$(printf '%s' "$out" | tr '\\n\\t' '  ' | cut -c1-300)")"
    fi
    printf '%s\\n' "$line" ) &
  i=$((i + 1)); [ $((i % {parallel})) -eq 0 ] && wait
done
wait
"""


def pairwise_script(nonce: str) -> str:
    """The sh script (stdin of :func:`pairwise_command`) for one node."""
    return _SCRIPT.format(nonce=nonce, timeout=CONNECT_TIMEOUT, parallel=PARALLEL)


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
_NOISE = re.compile(r"Warning: Permanently added [^\n]*?known hosts\.\s*")


def parse_pairwise(text: str, nonce: str, names: set[str]) -> tuple[dict[str, str], dict[str, Limits], dict[str, str]]:
    """``(pairwise, peer limits, resolved)`` from the script's output; lines about names not asked
    for are ignored. pairwise: peer -> "" when it connected, else the first words of why not."""
    pairwise: dict[str, str] = {}
    limits: dict[str, Limits] = {}
    resolved: dict[str, str] = {}
    prefix = f"@@{nonce}@@ "
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        kind, _, rest = line[len(prefix) :].partition(" ")
        if kind == "resolve":
            fields = rest.split()
            if len(fields) == 2 and fields[0] in names:
                resolved[fields[0]] = "" if fields[1] == "-" else fields[1][:64]
        elif kind == "ssh":
            peer, _, rest = rest.partition(" ")
            code, _, said = rest.partition(" ")
            if peer not in names or not is_number(code):
                continue
            match = _LIMITS.search(said)
            if code == "0" and match:
                pairwise[peer] = ""
                with contextlib.suppress(ParseError):  # a peer that prints nonsense: its limits stay unknown
                    limits[peer] = Limits(_limit(match.group(1), "pairwise"), _limit(match.group(2), "pairwise"))
            else:
                why = _NOISE.sub("", said).strip() or f"ssh exit {code}"
                pairwise[peer] = why[:120]
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
    return CheckResult(name, FAIL, tuple(at_fault), detail)
