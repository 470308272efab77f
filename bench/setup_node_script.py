#!/usr/bin/env python3
"""Node CPU of setup-cluster's no-change round trip: the script itself, whole and per fact read
(issue 37, item 1: where the round trip's time goes on the node).

On one plain sshd container (bench/sshd_nodes.py) with two cluster users, as
bench/setup_timeline.py makes them: a first run converges the node, then a no-change run is made
in this process with the script it sends captured (``Session.run`` wrapped: the command and its
stdin, byte for byte). That script is then run on the node as root (``docker exec``, the
sudo-less part of the round trip), N times, each part alone: the prologue with the path walk
(every user path's folders, one ``stat``), then the prologue plus one fact read, minus the
prologue alone; and the whole script. The per-part times are the best of N (the least disturbed
by other work on this shared machine); compare them within one run.

    python3 bench/setup_node_script.py --repeat 9
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from console import tool  # noqa: E402
from sshd_nodes import setup_inventory, start_nodes, stop_nodes  # noqa: E402

FACT_FRAME = re.compile(r"^printf '%s (fact|batch) %s\\n' \"\$PROVISION_FRAME\" (\d+)$")  # a root read, a user's reads
HEREDOC = re.compile(r"<<'(\S+)'$")
END_FRAME = "printf '%s end\\n' \"$PROVISION_FRAME\""
# Runs a script file N times as root and prints the best wall time in microseconds (the node's
# date(1) around each run: no interpreter of ours on the node).
TIMER = r"""
best=
i=0
while [ $i -lt "$2" ]; do
  s=$(date +%s%N); sh "$1" </dev/null >/dev/null 2>&1; e=$(date +%s%N)
  t=$(( (e - s) / 1000 )); if [ -z "$best" ] || [ $t -lt $best ]; then best=$t; fi; i=$((i + 1))
done
echo "$best"
"""


def capture(inventory: Path, known: Path) -> tuple[str, str]:
    """(command, stdin) of the no-change run's round trip to the one host."""
    import provision.transport.session as session
    from provision.cli import main

    sent = []
    run = session.Session.run

    def recording(self, command, stdin=None, timeout=None):
        sent.append((command, stdin if isinstance(stdin, bytes) else (stdin or "").encode()))
        return run(self, command, stdin, timeout)

    session.Session.run = recording
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the run's --json document is not this bench's output
            main(["setup-cluster", "-i", str(inventory), "--known-hosts", str(known), "--no-verify", "--json"])
    except SystemExit as done:
        if done.code not in (0, None):
            raise RuntimeError(f"the no-change run failed ({done.code})") from None
    finally:
        session.Session.run = run
    if len(sent) != 1:
        raise RuntimeError(f"expected one round trip, the run made {len(sent)}")
    command, stdin = sent[0]
    return command, stdin.decode().split("\n", 1)[1]  # the first stdin line is the (empty) sudo password


def parts(script: str) -> tuple[str, dict[str, str], str]:
    """The script's prologue (up to its first fact read), each part that reads facts (a fact read
    as root, ``fact N``; one user's reads, ``batch N``) by name, and its end. Frame lines inside a
    user's here-document are hers, not the script's."""
    lines = script.splitlines()
    starts, inside = [], None
    for i, line in enumerate(lines):
        if inside is not None:
            inside = None if line == inside else inside
        elif match := FACT_FRAME.match(line):
            starts.append((i, f"{match.group(1)} {match.group(2)}"))
        elif match := HEREDOC.search(line):
            inside = match.group(1)
    end = lines.index(END_FRAME)
    bounds = [i for i, _ in starts] + [end]
    facts = {name: "\n".join(lines[at : bounds[k + 1]]) for k, (at, name) in enumerate(starts)}
    return "\n".join(lines[: starts[0][0]]) + "\n", facts, "\n".join(lines[end:]) + "\n"


def timed(container: str, scripts: dict[str, str], repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` ms of each script, run as root on ``container``."""
    best = {}
    for name, text in scripts.items():
        subprocess.run(["docker", "exec", "-i", container, "sh", "-c", "cat >/tmp/part.sh"], input=text.encode(), check=True)
        out = subprocess.run(
            ["docker", "exec", container, "sh", "-c", TIMER, "sh", "/tmp/part.sh", str(repeat)],
            capture_output=True,
            text=True,
            check=True,
        )
        best[name] = int(out.stdout.strip()) / 1000
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=9)
    repeat = parser.parse_args().repeat
    work = Path(tempfile.mkdtemp(prefix="setup-node-script-"))
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load}: best of {repeat}, ms on the node")
    try:
        names, ports, key, known = start_nodes("snscript", 1, work)
        inventory = setup_inventory(work, ports, key)
        first = [tool("provision"), "setup-cluster", "-i", str(inventory), "--known-hosts", str(known), "--no-verify"]
        subprocess.run(first, capture_output=True, check=True)
        command, script = capture(inventory, known)
        prologue, facts, end = parts(script)
        scripts = {"empty": "#!/bin/sh\n", "prologue": prologue, "whole": script}
        scripts |= {name: prologue + text + "\n" + end for name, text in facts.items()}
        best = timed(names[0], scripts, repeat)
        shell, base = best["empty"], best["prologue"]
        print(f"{'part':<10} {'ms':>7}  what")
        print(f"{'sh':<10} {shell:7.1f}  an empty script (the shell's start and the timer)")
        print(f"{'prologue':<10} {base - shell:7.1f}  frames, the users' homes (getent), the path walk (one stat)")
        for name, text in facts.items():
            body = " ".join(text.splitlines()[1:])
            user = re.search(r"runuser -u (\S+)", body)
            paths = re.findall(r"; p=([^;]+);", body)
            if user:
                what = f"as {user.group(1)} (one runuser), {len(paths)} path(s): " + ", ".join(paths)
            else:
                what = "as root: " + re.sub(r"\s+", " ", body.replace("( ", "", 1))[:62]
            print(f"{name:<10} {best[name] - base:7.1f}  {what[:100]}")
        reads = sum(best[name] - base for name in facts)
        as_user = sum(best[name] - base for name, text in facts.items() if "runuser -u" in text)
        summed = f"prologue + reads {base - shell + reads:.1f}; the reads as users {as_user:.1f}"
        print(f"{'whole':<10} {best['whole'] - shell:7.1f}  ({summed})")
        print(f"the round trip runs it through: {command[:80]}...")
    finally:
        stop_nodes("snscript", 1)


if __name__ == "__main__":
    main()
