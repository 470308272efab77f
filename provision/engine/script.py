"""The one script a round trip runs on a host: pending changes in order (stopping at the first
that fails), then the facts the next tasks need, every part framed with a per-run nonce.

Pure: building and parsing are tested without SSH. The output is hostile: frames are only
believed with the nonce, bodies are bounded.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field

from provision.engine.acting import acting_user, on_stdin, refused, run_as
from provision.errors import ParseError
from provision.inventory.model import check_user
from provision.operations.base import Run, StateKey, Write, home_prelude, quote, shell_path
from provision.operations.paths import LOGIN_USER, path_read, walk_prelude
from provision.operations.state import reads_path, state_command
from provision.text import shown_value
from provision.transport.frames import frame_line, frame_setup, split_frames

BODY_LIMIT = 8 * 1024 * 1024
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
    return base + sum(limit + 10 for limit in own)  # + the 10 s between TERM and KILL


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
    each change is stopped after its own limit (:func:`step_limit`)."""
    out = ["umask 022", frame_setup(nonce), frame_line("begin")]
    for index, step in enumerate(steps):
        command = change_command(step.change)
        user, refusal = acting_user(command, as_root, step.become, step.user)
        if refusal:
            command = refused(refusal)
        elif user:
            command = run_as(command, user, f"PROVISION_{nonce}_{index}")
        out.append(frame_line("step", index))
        limit = (step.change.timeout if isinstance(step.change, Run) else None) or step_timeout
        if limit:
            command = step_limit(command, limit, f"PROVISION_{nonce}_{index}_limit")
        out.append(f"( {command}\n) </dev/null 2>&1; rc=$?")
        out.append(frame_line("rc", index, '"$rc"', newline_before=True))
        out.append('[ "$rc" -eq 0 ] || exit 0')
    walked = [(index, key.arg, key.user) for index, key in enumerate(keys) if reads_path(key)]
    if walked:  # every path's folders, walked in one stat for the whole round trip
        out.append(walk_prelude(walked, as_root).rstrip("\n"))
    reads = fact_reads(keys, as_root)
    batches = _batches(reads)
    emitted: set[str] = set()
    for index, command, reader in reads:
        if reader is None:
            out.append(frame_line("fact", index))
            out.append(f"( {command}\n) </dev/null 2>/dev/null")
            out.append("printf '\\n'")
        elif reader not in emitted:  # the user's every read, in one of her shells
            emitted.add(reader)
            number = list(batches).index(reader)
            out.append(frame_line("batch", number))
            out.append(f"( {batch_command(reads, reader, nonce, number)}\n) </dev/null 2>/dev/null")
            out.append("printf '\\n'")
    out.append(frame_line("end"))
    return "\n".join(out) + "\n"


def fact_reads(keys: list[StateKey], as_root: bool) -> list[tuple[int, str, str | None]]:
    """Each fact's ``(index, sh that reads it, reader)``: the ``runuser`` word of the user who
    reads it (:func:`reader_of`), None for the script's own user."""
    walked = {index for index, key in enumerate(keys) if reads_path(key)}
    reads = []
    for index, key in enumerate(keys):
        command = path_read(key.kind, index, key.arg) if index in walked else state_command(key)
        reads.append((index, command, reader_of(command, key.user, as_root)))
    return reads


def reader_of(command: str, user: str, as_root: bool) -> str | None:
    """Who reads a fact (``command``): for a ``command`` fact (``unless``) or an ``exists`` fact
    (``creates``) the task's user (``user``: "" the script's own, root, the login user, or a
    become_user); for any other fact the one user whose home it reads (:func:`acting_user`), so
    a link a user planted there leads only where that user could go. The ``runuser`` word of
    that user, or None where the script's own user reads it."""
    if user:
        if user in ("", "root") or (user == LOGIN_USER and not as_root):
            if user == "root" and not as_root:
                raise ValueError("a fact read as root needs a root round trip")
            return None
        if not as_root:
            raise ValueError(f"a fact read as {user} needs a root round trip")
        return '"$SUDO_USER"' if user == LOGIN_USER else check_user(user)
    home_user, refusal = acting_user(command, as_root)  # several homes: read as root, refused when planned
    return home_user if home_user and not refusal else None


def _batches(reads: list[tuple[int, str, str | None]]) -> dict[str, list[int]]:
    """The facts each user reads, by user, in the order of each user's first read."""
    batches: dict[str, list[int]] = {}
    for index, _command, reader in reads:
        if reader is not None:
            batches.setdefault(reader, []).append(index)
    return batches


def fact_batches(keys: list[StateKey], as_root: bool) -> list[list[int]]:
    """The indexes of the facts read by each ``batch`` of :func:`build_script`, in its order:
    what :func:`parse_output` believes each batch may hold."""
    return list(_batches(fact_reads(keys, as_root)).values())


def batch_nonce(nonce: str, number: int) -> str:
    """The frame marker of batch ``number``'s inner frames: derived from the run's ``nonce`` one
    way, so the user who prints them learns nothing of the run's own marker, and no other user
    (who never sees it) can guess it."""
    return hashlib.sha256(f"{nonce}:batch:{number}".encode()).hexdigest()[:24]


def batch_command(reads: list[tuple[int, str, str | None]], reader: str, nonce: str, number: int) -> str:
    """All of ``reader``'s fact reads in one of her shells (one ``runuser``, one PAM session,
    instead of one per read), each framed with :func:`batch_nonce`: she can forge the frames of
    her own reads only, which she could sway anyway; :func:`parse_output` believes no other. Her
    shell never sees the run's marker (it is no exported variable; the here-document's
    delimiter stays in root's shell)."""
    lines = [frame_setup(batch_nonce(nonce, number))]
    for index, command, own in reads:
        if own == reader:
            lines += [frame_line("fact", index), f"( {command}\n)", "printf '\\n'"]
    return run_as("\n".join(lines), reader, f"PROVISION_{nonce}_batch{number}")


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


_FRAMES = {("begin", 0), ("end", 0), ("step", 1), ("rc", 2), ("fact", 1), ("batch", 1)}  # (label, numbers) the script prints


@dataclass
class Output:
    """A parsed round trip: per step (index, exit code, output), fact bodies by index, and
    whether the script ran to its end."""

    steps: list[tuple[int, int, str]] = field(default_factory=list)
    facts: dict[int, str] = field(default_factory=dict)
    began: bool = False
    complete: bool = False


def parse_output(text: str, nonce: str, batches: list[list[int]] | None = None) -> Output:
    """Split the framed output of :func:`build_script`; ``batches``: :func:`fact_batches` of its
    facts. Raises :class:`ParseError` when the frames contradict the script (a forged or broken
    stream)."""
    result = Output()
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
            _keep_fact(result, numbers[0], body)
        elif kind == "batch":
            number = numbers[0]
            if number >= len(batches or []) or number in seen_batches:
                raise ParseError("engine", f"unexpected batch frame {number} (hostile or corrupt output)")
            seen_batches.add(number)
            _keep_batch(result, body, batch_nonce(nonce, number), batches[number])
    if pending_step is not None:
        result.steps.append((pending_step, -1, "connection lost while the change was running"))
    return result


def _keep_fact(result: Output, index: int, body: str) -> None:
    if len(body) > BODY_LIMIT:
        raise ParseError("engine", f"fact {index} output is larger than {BODY_LIMIT} bytes")
    result.facts[index] = body


def _keep_batch(result: Output, body: str, marker: str, members: list[int]) -> None:
    """One user's reads (:func:`batch_command`): only her own facts, each once; a read her shell
    printed nothing for (it never started: no such user) reads as empty, as a read of its own
    would have."""
    found: set[int] = set()
    for frame in split_frames(body, marker):
        index = frame.numbers[0] if frame.label == "fact" and len(frame.numbers) == 1 else None
        if index is None or index not in members or index in found:
            raise ParseError("engine", "a user's read printed a frame of another read (hostile output)")
        found.add(index)
        _keep_fact(result, index, frame.body)
    for index in members:
        result.facts.setdefault(index, "")
