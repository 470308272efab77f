"""A `doctor --perf` test server that no other user can stand in for (issue 33 finding 5).

Any user on a node can listen on the test port first (``iperf3 -s -p 47201``): the server doctor
starts then fails to bind, and a client that went ahead anyway would read that user's stream,
which can report any figure. So a test runs in three steps on the pair's two sessions:

1. :func:`start_command` on the server's node starts the tool in the background (its output in a
   private ``mktemp -d`` folder, its life bounded by a watchdog) and returns only once **that
   process** holds a listening socket on the test port: the socket's inode, found in
   ``/proc/net/tcp`` or ``tcp6`` in LISTEN state (``0A``) on the port, is one of
   ``/proc/PID/fd``'s links (``socket:[INODE]``). Linux lets only one socket listen on an address
   and port (without ``SO_REUSEPORT``, which the tools do not set and which needs the same user
   anyway), so while it listens every connection to the port reaches it. Where it exited (the
   port was taken: ``unable to start listener for connections: Address already in use``) or did
   not listen within the wait, the answer is ``@failed`` and its words: the test fails, named,
   and **no client runs**.
2. The client runs (no retry on a refused connection: the server is known to listen; a refusal
   is a firewall).
3. :func:`collect_command` waits for the server to end, prints its exit status and output, and
   removes the folder. iperf3's server output names the cookie of the client it served (``start.cookie``,
   which iperf3's ``iperf_on_connect`` adds on both ends); :mod:`provision.doctor.perf` counts
   the figures only when it is the cookie of doctor's own client (another user's client may have
   reached the one-off server first).

>>> FOLDER.fullmatch("/tmp/provision-perf.AbC0123456") is not None
True
"""

from __future__ import annotations

import re
import shlex

from provision.text import printable

FOLDER = re.compile(r"/tmp/provision-perf\.[A-Za-z0-9]{10}")
_STARTED = re.compile(r"@listening (/tmp/provision-perf\.[A-Za-z0-9]{10})")
_RC = re.compile(r"@rc ([0-9]{1,3}|none)")
MAX_SERVER_OUTPUT = 1 << 16  # an iperf3 server's --json report of a few seconds is ~6 KB


def start_command(tool: str, port: int, wait: int, listen_wait: float = 5.0) -> str:
    """The script that starts ``tool`` (a command line, already quoted) in the background for at
    most ``wait`` seconds and prints ``@listening FOLDER`` once it holds the listening socket on
    ``port``, else ``@failed`` and what it said (at most 4 KiB)."""
    port = int(port)
    tries = max(1, int(listen_wait / 0.05))
    hex_port = f"{port:04X}"
    return f"""d=$(mktemp -d /tmp/provision-perf.XXXXXXXXXX) || {{ echo '@failed mktemp -d in /tmp failed'; exit 1; }}
( {tool} >"$d/out" 2>&1 </dev/null & echo $! >"$d/pid"; wait $!; echo $? >"$d/rc" ) >/dev/null 2>&1 </dev/null &
( sleep {int(wait)}; p=$(cat "$d/pid"); kill $p; sleep 2; kill -9 $p; sleep 60; rm -rf -- "$d" ) >/dev/null 2>&1 </dev/null &
echo $! >"$d/watch"
failed() {{ echo "@failed $1"; head -c 4096 "$d/out"; kill "$(cat "$d/watch")"; rm -rf -- "$d"; exit 1; }}
i=0
while [ $i -lt {tries} ]; do
  if [ -s "$d/rc" ]; then failed "exit $(cat "$d/rc")"; fi
  p=$(cat "$d/pid" 2>/dev/null)
  if [ -n "$p" ]; then
    for n in $(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == "0A" && $2 ~ /:{hex_port}$/ {{ print $10 }}'); do
      for f in /proc/"$p"/fd/*; do [ "$(readlink "$f" 2>/dev/null)" = "socket:[$n]" ] && {{ echo "@listening $d"; exit 0; }}; done
    done
  fi
  i=$((i + 1)); sleep 0.05
done
p=$(cat "$d/pid" 2>/dev/null); [ -n "$p" ] && kill "$p" 2>/dev/null; sleep 0.2
failed "not listening on port {port} after {listen_wait:g} s"
"""


def parse_started(text: str) -> tuple[str | None, str, str]:
    """``(folder, "", "")`` when the server listens; ``(None, why, what it said)`` when it did not
    start (``exit 1``, ``not listening on port P after 5 s``; its output as it is, for the tool's
    own parser, which escapes what it shows)."""
    lines = text.strip().splitlines()
    if lines and (match := _STARTED.fullmatch(lines[-1])):
        return match.group(1), "", ""
    if lines and lines[0].startswith("@failed "):
        return None, printable(lines[0][len("@failed ") :], 120), "\n".join(lines[1:])
    return None, "no answer from the start script", text


def collect_command(folder: str, grace: int = 5) -> str:
    """The script that waits (at most ``grace`` seconds) for the server in ``folder`` to end,
    stops it if it did not, prints ``@rc N`` and its output (capped), and removes the folder."""
    if not FOLDER.fullmatch(folder):
        raise ValueError(f"not a perf server folder: {folder[:80]!r}")
    d = shlex.quote(folder)
    return (
        f'd={d}; i=0; while [ ! -s "$d/rc" ] && [ $i -lt {int(grace) * 10} ]; do i=$((i + 1)); sleep 0.1; done; '
        'if [ ! -s "$d/rc" ]; then p=$(cat "$d/pid" 2>/dev/null); [ -n "$p" ] && kill "$p" 2>/dev/null; sleep 0.3; fi; '
        'w=$(cat "$d/watch" 2>/dev/null); [ -n "$w" ] && kill "$w" 2>/dev/null; '
        'printf \'@rc %s\\n\' "$(cat "$d/rc" 2>/dev/null || echo none)"; '
        f'head -c {MAX_SERVER_OUTPUT} "$d/out"; rm -rf -- "$d"'
    )


def parse_collected(text: str) -> tuple[int | None, str]:
    """(the server's exit status, None when it had not ended; its output)."""
    first, _, rest = text.partition("\n")
    match = _RC.fullmatch(first.strip())
    if not match:
        return None, text
    return (None if match.group(1) == "none" else int(match.group(1))), rest
