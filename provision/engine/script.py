"""The one script a round trip runs on a host: pending changes in order (stopping at the first
that fails), then the facts the next tasks need, every part framed with a per-run nonce.

Pure: building and parsing are tested without SSH. The output is hostile: frames are only
believed with the nonce, bodies are bounded.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from provision.engine.acting import acting_user, on_stdin, refused, run_as
from provision.engine.user_shells import (
    PRIVATE_FOLDER,
    PRIVATE_GRACE,
    STEP_OUTPUT_LIMIT,
    batch_command,
    batch_facts,
    batch_nonce,
    batches_of,
    bounded_body,
    fact_reads,
    private_output,
)
from provision.errors import ParseError
from provision.operations.base import Run, StateKey, Write, home_prelude, quote, shell_path
from provision.operations.paths import walk_prelude
from provision.operations.state import reads_path
from provision.text import shown_value
from provision.transport.frames import frame_line, frame_setup, split_frames

BECOME_FAILED = 92


def narrowing(mode: int) -> str:
    """The ``chmod`` symbolic mode that removes every permission bit ``mode`` lacks (a backup is
    never wider than the file it backs up)."""
    parts = []
    for who, shift in (("u", 6), ("g", 3), ("o", 0)):
        lacking = "".join(flag for flag, bit in (("r", 4), ("w", 2), ("x", 1)) if not (mode >> shift) & bit)
        if lacking:
            parts.append(f"{who}-{lacking}")
    parts.append("ug-s,-t")
    return ",".join(parts)


# A copy of a file's bytes that opens no link and waits on no FIFO, private to the writer.
_COPY = '(umask 077; dd if="{source}" of="{copy}" iflag=nofollow,nonblock 2>/dev/null)'


def write_command(change: Write) -> str:
    """Shell that writes a file atomically, never through a name another user may plant: the new
    file and the old one's backup are made in a fresh private folder beside the file (``mktemp
    -d``: 0700, the writer's), the new file is renamed over the name (``mv -T``: a link there is
    replaced, never followed), and the old file (``ln -P``: the name's own inode, a link linked
    as a link) is kept as ``PATH.provision~`` by a rename too, narrowed to the new mode. A backup
    is made only of a regular file: one of another owner's, or with other names, is copied
    (``dd`` with O_NOFOLLOW and O_NONBLOCK, umask 077) rather than narrowed in place; a link or
    anything else at the name is not kept. Nothing is chmod-ed or chown-ed but in the private
    folder. Stale work folders of an interrupted run (the writer's own) are removed first. The
    engine runs writes below a home as that home's user (:mod:`provision.engine.acting`)."""
    word = shell_path(change.path)
    payload = base64.b64encode(change.content).decode()
    lines = [
        f'p={word}; d=${{p%/*}}; [ -n "$d" ] || d=/; n=${{p##*/}}',
        '[ -d "$d" ] || { e="folder $d does not exist"; [ "$(id -u)" -eq 0 ] || e="$e, or $(id -un) cannot reach it"; '
        'echo "$e" >&2; exit 1; }',
        'for s in "$d/.$n.provision-tmp."*; do if [ -O "$s" ] && [ ! -L "$s" ]; then rm -rf -- "$s"; fi; done',
        'w=$(mktemp -d "$d/.$n.provision-tmp.XXXXXX") || exit 1',
        "trap 'rm -rf -- \"$w\"' EXIT",
        f"printf %s '{payload}' | base64 -d >\"$w/new\" || exit 1",
    ]
    if change.owner or change.group:
        spec = (change.owner or "") + (f":{change.group}" if change.group else (":" if change.owner else ""))
        lines.append(f'chown -h {quote(spec)} "$w/new" || exit 1')
    mode = change.mode if change.mode is not None else (0o600 if change.secret else 0o644)
    lines += [
        f'chmod {mode:04o} "$w/new" || exit 1',
        'ln -P -- "$p" "$w/old" 2>/dev/null || '
        f'{{ [ ! -f "$p" ] || {_COPY.format(source="$p", copy="$w/old")} || rm -f -- "$w/old"; }}',
        'mv -fT -- "$w/new" "$p" || exit 1',
        'k=; if [ -f "$w/old" ] && [ ! -L "$w/old" ]; then '
        'if [ -O "$w/old" ] && [ "$(stat -c %h -- "$w/old")" -eq 1 ]; then k=1; '
        f'elif {_COPY.format(source="$w/old", copy="$w/copy")}; then mv -fT -- "$w/copy" "$w/old" && k=1; fi; fi',
        f'if [ -n "$k" ]; then chmod {narrowing(mode)} -- "$w/old"; mv -fT -- "$w/old" "$p.provision~" '
        '|| echo "the previous $p was not kept as $p.provision~" >&2; fi',
    ]
    return "\n".join(lines)


def change_command(change: Run | Write) -> str:
    """The shell for one change, with the home folders it uses resolved first."""
    body = write_command(change) if isinstance(change, Write) else change.command
    prelude = home_prelude(body)
    return f"{prelude}\n{body}" if prelude else body


def step_limit(command: str, seconds: float, delimiter: str) -> str:
    """``command`` stopped after ``seconds`` (TERM, then KILL 10 s later, to its whole process
    group: an installer and its children), saying so; exit status 124 then. The command travels
    on the shell's stdin (:func:`on_stdin`), never in argv."""
    return (
        f"{on_stdin(f'timeout -k 10 {seconds:g} sh -s', command, delimiter)}\nr=$?; "
        f"[ $r -ne 124 ] || echo 'provision: step stopped after {seconds:g}s (its time limit: --command-timeout)'; exit $r"
    )


def round_trip_limit(steps: list[Step], step_timeout: float | None, base: float) -> float:
    """How long a round trip may run: ``base`` (reading facts) plus every step's own limit."""
    own = [(step.change.timeout if isinstance(step.change, Run) else None) or step_timeout or base for step in steps]
    return base + sum(limit + 10 + PRIVATE_GRACE for limit in own)  # + the 10 s between TERM and KILL


def upload_prelude(folder: str | None) -> str:
    """The script line that tells steps where the round trip's uploads are (exported: steps run
    in their own ``sh``)."""
    return f"PROVISION_UPLOADS={quote(folder)}; export PROVISION_UPLOADS\n" if folder else ""


@dataclass(frozen=True)
class Step:
    """A change to apply; ``become`` False in a root script drops to the login user."""

    change: Run | Write
    become: bool
    user: str | None = None  # become_user: run the change as this user (from a root script)


def build_script(steps: list[Step], keys: list[StateKey], nonce: str, as_root: bool, step_timeout: float | None = None) -> str:
    """The POSIX sh script for one round trip (fed on stdin to ``sh -s``); with ``step_timeout``
    each change is stopped after its own limit (:func:`step_limit`). In a root script each change
    and each user's shell writes into a private pipe that root drains into the output, and one
    user's reads share one shell of hers (:mod:`provision.engine.user_shells`)."""
    out = ["umask 022", frame_setup(nonce)]
    body: list[str] = []
    private = False  # whether the script needs the private folder for its pipes
    for index, step in enumerate(steps):
        command = change_command(step.change)
        user, refusal = acting_user(command, as_root, step.become, step.user)
        if refusal:
            command = refused(refusal)
        elif user:
            command = run_as(command, user, f"PROVISION_{nonce}_{index}")
        body.append(frame_line("step", index))
        limit = (step.change.timeout if isinstance(step.change, Run) else None) or step_timeout
        if limit:
            command = step_limit(command, limit, f"PROVISION_{nonce}_{index}_limit")
        if as_root:  # a root script: a change may start a user's process (runuser, su) that keeps its output
            private = True
            body.append(private_output(command, f"step{index}", STEP_OUTPUT_LIMIT))
        else:  # the login user's own script: only her own processes
            body.append(f"( {command}\n) </dev/null 2>&1; rc=$?")
        body.append(frame_line("rc", index, '"$rc"', newline_before=True))
        body.append('[ "$rc" -eq 0 ] || exit 0')
    walked = [(index, key.arg, key.user) for index, key in enumerate(keys) if reads_path(key)]
    if walked:  # every path's folders, walked in one stat for the whole round trip
        body.append(walk_prelude(walked, as_root).rstrip("\n"))
    reads = fact_reads(keys, as_root)
    batches = batches_of(reads)
    numbers = {reader: number for number, (reader, _members) in enumerate(batches)}
    for index, command, reader in reads:
        if reader is None:
            body += [frame_line("fact", index), f"( {command}\n) </dev/null 2>/dev/null", "printf '\\n'"]
        elif batches[numbers[reader]][1][0] == index:  # the user's every read, in one shell of hers
            number, private = numbers[reader], True
            body.append(batch_command(reads, reader, batches[number][1], nonce, number))
    if private:
        out.append(PRIVATE_FOLDER)
    out += [frame_line("begin"), *body, frame_line("end")]
    return "\n".join(out) + "\n"


# sudo reads the password from a pipe the shell fills with the printf builtin (never a command
# line, never a file) and only validates it (-v); the script then runs with the cached timestamp
# (-n), its stdin free for the script. Nothing is executed from /tmp, so a noexec /tmp works.
# Where timestamps are off (timestamp_timeout=0), an askpass helper in a private folder of the
# login user's home prints the password from sudo's own environment.
_BECOME = (
    'IFS= read -r P; if [ -z "$P" ]; then exec sudo -n -- sh -s; fi; '
    "printf '%s\\n' \"$P\" | sudo -S -p '' -v || exit {code}; "
    "if sudo -n true 2>/dev/null; then P=; sudo -n -- sh -s; R=$?; sudo -k; exit $R; fi; "
    'A=$(mktemp -d "$HOME/.provision-askpass.XXXXXX") || exit {code}; '
    'printf \'#!/bin/sh\\nprintf "%%s\\\\n" "$PROVISION_BECOME"\\n\' >"$A/p"; chmod 700 "$A/p"; '
    'PROVISION_BECOME="$P" SUDO_ASKPASS="$A/p" sudo -A -p \'\' -- sh -s; R=$?; rm -rf "$A"; exit $R'
)


def remote_command(as_root: bool) -> str:
    """The command that runs the script from stdin: ``sh -s``, or through sudo (the first stdin
    line is the sudo password, empty when none was given)."""
    return _BECOME.format(code=BECOME_FAILED) if as_root else "sh -s"


def stdin_for(script: str, as_root: bool, password: str | None) -> bytes:
    """What to send on stdin: the password line (become only) then the script."""
    if not as_root:
        return script.encode()
    if password and ("\n" in password or "\r" in password):
        raise ValueError("the become password may not contain a newline")
    return ((password or "") + "\n" + script).encode()


# (label, numbers) the script prints
_FRAMES = {("begin", 0), ("end", 0), ("step", 1), ("rc", 2), ("fact", 1), ("batch", 1), ("nouser", 1)}


@dataclass
class Output:
    """A parsed round trip: per step (index, exit code, output), fact bodies by index, and
    whether the script ran to its end."""

    steps: list[tuple[int, int, str]] = field(default_factory=list)
    facts: dict[int, str] = field(default_factory=dict)
    began: bool = False
    complete: bool = False


def parse_output(text: str, nonce: str, batches: list[tuple[str, list[int]]] | None = None) -> Output:
    """Split the framed output of :func:`build_script`; ``batches``: the users' batches of its
    facts (:func:`provision.engine.user_shells.fact_batches`). Raises :class:`ParseError` when
    the frames contradict the script (a forged or broken stream)."""
    result = Output()
    batches = batches or []
    batched = {index for _reader, members in batches for index in members}
    pending_step: int | None = None
    step_body = ""
    seen_batches: set[int] = set()
    for frame in split_frames(text, nonce):
        kind, numbers, body = frame.label, frame.numbers, frame.body
        if (kind, len(numbers)) not in _FRAMES:
            raise ParseError("engine", f"unexpected frame {shown_value(kind[:60])} (hostile or corrupt output)")
        if kind == "begin":
            result.began = True
        elif kind == "end":
            result.complete = True
        elif kind == "step":
            pending_step, step_body = numbers[0], body
        elif kind == "rc":
            if pending_step is None or numbers[0] != pending_step:
                raise ParseError("engine", "exit-code frame without its step")
            result.steps.append((pending_step, numbers[1], step_body.rstrip("\n")[-4000:]))
            pending_step = None
        elif kind == "fact":
            if numbers[0] in batched:
                raise ParseError("engine", f"fact {numbers[0]} is read by a user, not by the script (hostile output)")
            result.facts[numbers[0]] = bounded_body(numbers[0], body)
        elif kind in ("batch", "nouser"):
            number = numbers[0]
            if number >= len(batches) or number in seen_batches:
                raise ParseError("engine", f"unexpected batch frame {number} (hostile or corrupt output)")
            seen_batches.add(number)
            reader, members = batches[number]
            if kind == "nouser":  # root found no such user: her reads are empty, as reads of a missing home are
                result.facts.update(dict.fromkeys(members, ""))
            else:
                result.facts.update(batch_facts(body, batch_nonce(nonce, number), members, reader))
    if pending_step is not None:
        result.steps.append((pending_step, -1, "connection lost while the change was running"))
    return result
