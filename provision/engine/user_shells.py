"""The shells root's round trip starts for a change or for a cluster user: what they print
reaches the round trip's output only through root, and one user's reads share one shell of hers.

Root reads ``~alice/`` paths, and runs ``become_user`` checks and changes, as alice
(:mod:`provision.engine.acting`). Two rules:

- **No change and no user's shell writes on the round trip's output.** A process it left behind
  (one a change of alice's started, one that took her shell's descriptors) could go on writing
  there after the shell ended, into root's reads or another user's, and hold the round trip open.
  Each change, root's too (it may run ``runuser -u alice`` or ``su``), and each user's reads write
  into a pipe of their own in a folder only root can enter (:data:`PRIVATE_FOLDER`), which root
  drains into the output, bounded, until :data:`PRIVATE_GRACE` after the shell ended
  (:func:`private_output`). No file grows on the node.
- **Her reads run in one shell** (one ``runuser``, one PAM session, not one per read), each framed
  with a marker derived one way from the run's nonce (:func:`batch_nonce`). She may sway her own
  reads; :func:`batch_facts` believes no frame of any other read, none twice, and a batch that
  does not end with her shell's ``done`` frame fails the host. Her reads are empty only where
  root itself finds no such user (frame ``nouser``), as reads in a missing home are.

Example::

    >>> reader_of('p="${H_616c696365}"/.ssh', "", True)
    'alice'
    >>> batch_facts("@@m@@ fact 3\\nx\\n@@m@@ done\\n", "m", [3], "alice")
    {3: 'x'}
"""

from __future__ import annotations

import hashlib
import shlex

from provision.engine.acting import LOGIN_WORD, acting_user, run_as, user_word
from provision.errors import ParseError
from provision.inventory.model import check_user
from provision.operations.base import StateKey
from provision.operations.paths import LOGIN_USER, path_read
from provision.operations.state import reads_path, state_command
from provision.text import shown_value
from provision.transport.frames import frame_line, frame_setup, split_frames

BODY_LIMIT = 8 * 1024 * 1024  # one fact's output
STEP_OUTPUT_LIMIT = 1024 * 1024  # the end of a change's output that reaches the controller
PRIVATE_GRACE = 1  # seconds a pipe may stay open after its command ended (a process it left behind)

# Made before the script's first frame (a script that cannot make it fails before it begins,
# saying why), in /tmp only while /tmp is root's and sticky (shell tests, no process): no user can
# rename the folder away. Removed on exit; dash runs no EXIT trap on a signal, so each signal exits.
PRIVATE_FOLDER = (
    "[ -k /tmp ] && [ -O /tmp ] || "
    "{ echo 'provision: /tmp is not root'\"'\"'s sticky folder: no private place for output pipes' >&2; exit 1; }\n"
    "PROVISION_OWN=$(mktemp -d /tmp/.provision-own.XXXXXX) || "
    "{ echo 'provision: no private folder for output pipes (mktemp -d in /tmp)' >&2; exit 1; }\n"
    "trap 'rm -rf -- \"$PROVISION_OWN\"' EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 141' PIPE; "
    "trap 'exit 143' TERM"
)


def private_output(command: str, name: str, limit: int, stderr: str = "&1") -> str:
    """``command`` (a change, or a user's shell) writing into a pipe ``name`` of the private folder
    (stdout, and stderr unless ``stderr`` says otherwise); ``$rc`` holds its exit status. Root's
    ``cat`` reads the pipe into a second one, whose ``tail -c limit`` keeps the last ``limit``
    bytes and writes them to the round trip's output once its input ends. ``tail`` reads eagerly,
    so ``cat`` only ever waits on the pipe, never on a slow controller: once the command ended, a
    process it left behind may keep the pipe open :data:`PRIVATE_GRACE` seconds, then ``cat`` is
    stopped, the output says so, and that process's next write fails. What the command printed
    is whole; no file grows on the node."""
    return (
        f'PROVISION_F="$PROVISION_OWN"/{shlex.quote(name)}\n'
        'if [ -O "$PROVISION_OWN" ] && [ ! -L "$PROVISION_OWN" ] && mkfifo -m 600 -- "$PROVISION_F" "$PROVISION_F.out"; then\n'
        f'tail -c {limit} <"$PROVISION_F.out" & PROVISION_T=$!\n'
        'cat >"$PROVISION_F.out" <"$PROVISION_F" 2>/dev/null & PROVISION_C=$!\n'  # its output opened first: stopped, it ends tail
        f'( {command}\n) </dev/null >"$PROVISION_F" 2>{stderr}; rc=$?\n'
        f"( sleep {PRIVATE_GRACE}; kill $PROVISION_C ) </dev/null >/dev/null 2>&1 & PROVISION_D=$!\n"
        "wait $PROVISION_C 2>/dev/null; PROVISION_S=$?; wait $PROVISION_T; kill $PROVISION_D 2>/dev/null\n"
        f"[ $PROVISION_S -ne 143 ] || echo 'provision: output closed {PRIVATE_GRACE}s after the command ended: "
        "a process it left behind held it'\n"
        "else rc=125; echo 'provision: no private pipe for this output (the folder in /tmp changed)'; fi"
    )


def fact_reads(keys: list[StateKey], as_root: bool) -> list[tuple[int, str, str | None]]:
    """Each fact's ``(index, sh that reads it, reader)``: the ``runuser`` word of the user who
    reads it (:func:`reader_of`), None for the script's own user."""
    reads = []
    for index, key in enumerate(keys):
        command = path_read(key.kind, index, key.arg) if reads_path(key) else state_command(key)
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
        return LOGIN_WORD if user == LOGIN_USER else check_user(user)
    home_user, refusal = acting_user(command, as_root)  # several homes: read as root, refused when planned
    return home_user if home_user and not refusal else None


def batches_of(reads: list[tuple[int, str, str | None]]) -> list[tuple[str, list[int]]]:
    """``(reader, the indexes of her facts)`` per user, in the order of each user's first read."""
    batches: dict[str, list[int]] = {}
    for index, _command, reader in reads:
        if reader is not None:
            batches.setdefault(reader, []).append(index)
    return list(batches.items())


def fact_batches(keys: list[StateKey], as_root: bool) -> list[tuple[str, list[int]]]:
    """The batches a round trip reading ``keys`` holds (:func:`batches_of`): what the parser
    believes each may hold."""
    return batches_of(fact_reads(keys, as_root))


def batch_nonce(nonce: str, number: int) -> str:
    """The frame marker of batch ``number``'s inner frames: derived from the run's ``nonce`` one
    way, so the user who prints them learns nothing of the run's own marker, and no other user
    (who never sees it) can guess it."""
    return hashlib.sha256(f"{nonce}:batch:{number}".encode()).hexdigest()[:24]


def batch_command(reads: list[tuple[int, str, str | None]], reader: str, members: list[int], nonce: str, number: int) -> str:
    """Frame ``batch N`` and all of ``reader``'s fact reads in one of her shells, each framed with
    :func:`batch_nonce`, then ``done``, through a private pipe (:func:`private_output`); or frame
    ``nouser N`` where no such user exists (root says so: her facts then read as empty). Her shell
    never sees the run's marker: it is no exported variable, and the here-document's delimiter
    stays in root's shell."""
    lines = [frame_setup(batch_nonce(nonce, number))]
    for index, command, own in reads:
        if own == reader:
            lines += [frame_line("fact", index), f"( {command}\n)", "printf '\\n'"]
    lines.append(frame_line("done"))
    shell = run_as("\n".join(lines), reader, f"PROVISION_{nonce}_batch{number}")
    return "\n".join(
        [
            f"if id -u -- {user_word(reader)} >/dev/null 2>&1; then",
            frame_line("batch", number),
            private_output(shell, f"batch{number}", len(members) * (BODY_LIMIT + 4096), "/dev/null"),
            f"else {frame_line('nouser', number)}; fi",
            "printf '\\n'",
        ]
    )


def bounded_body(index: int, body: str) -> str:
    """Fact ``index``'s ``body``, or :class:`ParseError` when it is over :data:`BODY_LIMIT`."""
    if len(body) > BODY_LIMIT:
        raise ParseError("engine", f"fact {index} output is larger than {BODY_LIMIT} bytes")
    return body


def who(reader: str) -> str:
    """A reader as a message names her."""
    return "the login user" if reader == LOGIN_WORD else reader


def batch_facts(body: str, marker: str, members: list[int], reader: str) -> dict[int, str]:
    """The fact bodies of one user's batch (its frames marked ``@@marker@@``): each of
    ``members`` once, then ``done``. Raises :class:`ParseError` for a frame of any other read,
    one twice, or a batch cut short (her shell ended, or could not write, before its last read)."""
    facts: dict[int, str] = {}
    done = False
    for frame in split_frames(body, marker):
        if done:
            raise ParseError("engine", f"the reads as {who(reader)} printed a frame after their end (hostile output)")
        if frame.label == "done" and not frame.numbers:
            done = True
            continue
        index = frame.numbers[0] if frame.label == "fact" and len(frame.numbers) == 1 else None
        if index is None or index not in members or index in facts:
            raise ParseError("engine", f"the reads as {who(reader)} printed a frame of another read (hostile output)")
        facts[index] = bounded_body(index, frame.body)
    if not done or len(facts) != len(members):
        name = who(reader)
        said = body.strip("\n").splitlines()[-1:] if not facts else []  # no frame at all: what was printed instead
        why = f"printed only {shown_value(said[0][:200])}" if said else f"{name}'s shell ended before its last read"
        raise ParseError("engine", f"the reads as {name} were cut short ({why})")
    return facts
