"""Run a launch plan: put the rank file (and hostfile) on the first host and run mpirun there.

- The files go into a fresh private directory made by ``mktemp -d`` on the host
  (``~/.provision/XxYxZ.XXXXXXXXXX/``), so two jobs with the same dims never share a file; it is
  removed when mpirun ends.
- mpirun runs in a terminal (an SSH pty, as ``ssh -t``): Ctrl-C here is sent as the terminal's
  interrupt, so mpirun gets SIGINT and stops its ranks on every host; a second Ctrl-C closes the
  connection and sshd's hangup (SIGHUP) stops it. Its stdout and stderr arrive together.
- With ``--report-bindings`` the reported bindings (OpenMPI 4 or 5 format) are checked against the plan.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import re
import shlex
import shutil
import signal
import sys
import threading
from collections.abc import Callable

from provision.inventory.model import Host
from provision.launch.bindings import Binding, check_bindings, parse_binding_line
from provision.launch.mpirun import DEFAULT_EXPORTS, quoted, root_message
from provision.plans.rankfile import RankPlan
from provision.text import shown, shown_value
from provision.transport.connection import describe_failure, open_connection
from provision.transport.options import SshOptions

_RUN_DIR = re.compile(r"^\.provision/[0-9x]{1,40}\.[A-Za-z0-9]{10}\Z")
MAX_LINE = 1 << 16  # longest output line scanned for a binding report
INTERRUPTED = 130


class LaunchError(Exception):
    """A step before mpirun failed; the message is one line."""


def login_user(host: Host, options: SshOptions) -> str | None:
    """The user ``host`` would be logged in as (inventory, then ~/.ssh/config, then local); no network."""
    try:
        return open_connection(host, options).user
    except Exception:  # noqa: BLE001 - only for a warning; --run asks the host itself (id -u)
        return None


def _make_run_dir(connection, dims: str) -> str:
    """``mktemp -d .provision/DIMS.XXXXXXXXXX`` on the host; the answer is checked, not trusted."""
    template = f".provision/{dims}.XXXXXXXXXX"
    result = connection.run(
        f"mkdir -p .provision && chmod 700 .provision && mktemp -d {shlex.quote(template)}", hide=True, warn=True, in_stream=False
    )
    path = result.stdout.strip()
    if result.exited != 0 or not _RUN_DIR.match(path):
        raise LaunchError(f"mktemp -d {template} failed: {shown_value((result.stderr.strip() or path)[:200])}")
    return path


def _unset_variables(connection, names: tuple[str, ...]) -> frozenset[str]:
    """Which of ``names`` (constants, not user input) are unset in the host's login environment,
    the one mpirun starts in; the answer is checked against ``names``, not trusted."""
    words = " ".join(shlex.quote(name) for name in names)
    result = connection.run(
        f'for n in {words}; do printenv "$n" >/dev/null || echo "$n"; done', hide=True, warn=True, in_stream=False
    )
    return frozenset(line for line in result.stdout.split() if line in names)


def _login_uid(connection) -> str:
    result = connection.run("id -u", hide=True, warn=True, in_stream=False)
    uid = result.stdout.strip()
    if result.exited != 0 or not uid.isdigit():
        raise LaunchError(f"id -u failed: {shown_value((result.stderr.strip() or uid)[:200])}")
    return uid


# Never a password prompt: mpirun would hang on it. The timeout is generous: on a loaded first host
# many key exchanges at once are slow, and a slow host is not an unreachable one.
_SSH_CHECK = "ssh -n -o BatchMode=yes -o ConnectTimeout=30"
_SSH_AT_ONCE = 16  # checks in flight from the first host (each is a key exchange: CPU there)


def _pasted(path: str) -> str:
    """``path`` as a shell word to paste, or made visible when it would break the line."""
    return shlex.quote(path) if path.isprintable() else shown(path, newlines=False)


def _peer_reachability(connection, first: str, peers: list[str], inventory_path: str | None = None) -> bool:
    """Check that the first host reaches every other planned host by SSH without a prompt (else
    :class:`LaunchError` naming them: mpirun would hang or fail), and whether the second reaches
    the third: OpenMPI's tree spawn needs every node to reach every other. Returns True when it
    does not (then mpirun must start every daemon itself). Names are inventory host names,
    checked when the inventory was read, and quoted here anyway."""
    others = [name for name in peers if name != first]
    if not others:
        return False
    failed = _unreachable(connection, others)
    if failed:  # once more for those: a fresh node's first connection can time out on a loaded host
        failed = _unreachable(connection, sorted(failed, key=others.index))
    if failed:
        names = sorted(failed, key=others.index)
        listed = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        raise LaunchError(
            f"cannot SSH without a prompt to {listed} (ssh -o BatchMode=yes; {names[0]}: {shown_value(failed[names[0]])}): "
            "mpirun would hang or fail there; set up passwordless SSH between the hosts "
            f"(provision setup-cluster{' -i ' + _pasted(inventory_path) if inventory_path else ''})"
        )
    if len(others) < 2:
        return False
    hop = f"{_SSH_CHECK} {shlex.quote(others[0])} {_SSH_CHECK} {shlex.quote(others[1])} true"
    inner = connection.run(hop, hide=True, warn=True, in_stream=False)
    if inner.exited == 0:
        return False
    why = shown((inner.stderr.strip().splitlines() or [f"exit {inner.exited}"])[-1][:160], newlines=False)
    print(
        f"provision: {others[0]} cannot SSH to {others[1]} ({why}): the nodes cannot reach each other, so "
        f"mpirun starts every daemon from {first} (no tree spawn)",
        file=sys.stderr,
    )
    return True


def _unreachable(connection, others: list[str]) -> dict[str, str]:
    """{host: the last line ssh said} for the hosts the connection's host cannot SSH to."""
    words = " ".join(shlex.quote(name) for name in others)
    result = connection.run(
        f'i=0; for h in {words}; do (e=$({_SSH_CHECK} "$h" true 2>&1 </dev/null >/dev/null) || '
        """printf '%s %s\\n' "$h" "$(printf '%s' "$e" | tail -n 1)") & """
        f"i=$((i + 1)); [ $((i % {_SSH_AT_ONCE})) -ne 0 ] || wait; done; wait",
        hide=True,
        warn=True,
        in_stream=False,
    )
    failed = {}  # host -> the last line ssh said (bounded: it is printed)
    for line in result.stdout.splitlines():
        name, _, why = line.partition(" ")
        if name in others:
            failed.setdefault(name, why.strip()[:160] or "no reason given")
    return failed


class _BindingScanner:
    """Collects ``--report-bindings`` lines from streamed output, bounded per line and per rank."""

    def __init__(self, ranks: int) -> None:
        self.ranks = ranks
        self.partial = b""
        self.bindings: dict[int, Binding] = {}

    def feed(self, data: bytes) -> None:
        """Scan the complete lines in ``data`` (the rest waits for the next chunk)."""
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()[-MAX_LINE:]
        for line in lines:
            binding = parse_binding_line(line[:MAX_LINE].decode("utf-8", "replace"))
            if binding is not None and binding.rank < self.ranks:
                self.bindings.setdefault(binding.rank, binding)


class EscapedOutput:
    """The ranks' bytes as they arrive, written to ``out`` with every control character escaped
    (:func:`provision.text.shown`: a rank's ``ESC[2J`` or ``ESC]0;title`` is shown as ``\\x1b[2J``,
    never obeyed); a character split across two chunks is decoded whole, a byte that is not
    UTF-8 is written as ``\\xNN``.

    >>> import io; out = io.BytesIO(); escaped = EscapedOutput(out)
    >>> escaped.write(b"rank 0 \\x1b[2Jok \\xe2\\x9c"); escaped.write(b"\\x93\\n"); out.getvalue().decode()
    'rank 0 \\\\x1b[2Jok \u2713\\n'
    """

    def __init__(self, out) -> None:
        self.out = out
        self.decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")

    def write(self, data: bytes, final: bool = False) -> None:
        text = self.decoder.decode(data, final)
        if text:
            self.out.write(shown(text).encode())
            self.out.flush()


def _stream(channel, scanner: _BindingScanner | None, out) -> int:
    """Copy the channel's output to ``out`` until it ends, its control characters escaped
    (:class:`EscapedOutput`); returns the exit status.

    First Ctrl-C: send the terminal's interrupt character (mpirun gets SIGINT). Second: close the
    channel (sshd hangs up the terminal, mpirun gets SIGHUP). SIGINT only sets a flag while this
    runs: a KeyboardInterrupt raised inside paramiko's reads could leave the channel half-used."""
    interrupts = [0]
    handled = 0
    escaped = EscapedOutput(out)

    def on_sigint(_signum, _frame) -> None:
        interrupts[0] += 1

    previous = signal.signal(signal.SIGINT, on_sigint) if threading.current_thread() is threading.main_thread() else None
    try:
        channel.settimeout(0.2)
        while True:
            if interrupts[0] > handled:
                handled = interrupts[0]
                if handled == 1:
                    message = "\nprovision: interrupt sent to mpirun (Ctrl-C again closes the connection)"
                    print(message, file=sys.stderr, flush=True)
                    channel.send(b"\x03")
                else:
                    channel.close()
                    return INTERRUPTED
            try:
                data = channel.recv(65536)
            except TimeoutError:
                continue
            if not data:
                escaped.write(b"", final=True)
                break
            escaped.write(data)
            if scanner is not None:
                scanner.feed(data)
        while not channel.exit_status_ready():  # output ended; the status follows
            if interrupts[0] > 1:
                channel.close()
                return INTERRUPTED
            channel.status_event.wait(0.2)
        status = channel.recv_exit_status()
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return INTERRUPTED if interrupts[0] and status in (0, -1) else status


def run_from_first_host(
    host: Host,
    options: SshOptions,
    plan: RankPlan,
    files: dict[str, str],
    argv_for: Callable[..., list[str]],
    *,
    allow_run_as_root: bool = False,
    check: bool = False,
    inventory_path: str | None = None,
) -> int:
    """Put ``files`` ({name: text}) in a fresh directory on ``host``, run ``argv_for(directory,
    unset)`` there in a terminal (``unset``: the default ``-x`` variables not set on the host;
    ``no_tree_spawn=True`` is added when the hosts cannot SSH to each other),
    streaming its output here; remove the directory after. ``check``: compare the reported bindings
    with ``plan``; ``inventory_path`` goes into the setup-cluster hint. Returns mpirun's exit status (2: refused before it ran,
    1: a host failed or bindings differ from the plan, 130: interrupted)."""
    connection = None
    run_dir = None
    try:
        connection = open_connection(host, options)
        if _login_uid(connection) == "0" and not allow_run_as_root:
            print(f"provision: error: {root_message(host.name, connection.user)}", file=sys.stderr)
            return 2
        run_dir = _make_run_dir(connection, str(plan.dims))
        for name, text in files.items():
            connection.put(io.BytesIO(text.encode()), remote=f"{run_dir}/{name}")
        unset = _unset_variables(connection, DEFAULT_EXPORTS)
        for name in sorted(unset):
            print(f"provision: {name} is not set on {host.name}: not passed with -x", file=sys.stderr)
        no_tree = _peer_reachability(connection, plan.hosts[0].host, [h.host for h in plan.hosts], inventory_path)
        argv = argv_for(run_dir, unset, no_tree_spawn=no_tree) if no_tree else argv_for(run_dir, unset)
        print(f"[{host.name}] $ {quoted(argv)}", file=sys.stderr, flush=True)
        channel = connection.client.get_transport().open_session()
        size = shutil.get_terminal_size((200, 50))
        channel.get_pty(term="dumb", width=size.columns, height=size.lines)
        # No \r added to each output line (-onlcr); exec: mpirun itself gets the terminal's signals.
        channel.exec_command(f"stty -onlcr 2>/dev/null; exec {quoted(argv)}")
        scanner = _BindingScanner(plan.dims.learners) if check else None
        status = _stream(channel, scanner, sys.stdout.buffer)
        if scanner is not None and status == 0:
            problems = check_bindings(plan, scanner.bindings)
            for problem in problems[:20]:
                print(f"provision: binding: {shown(problem, newlines=False)}", file=sys.stderr)
            if problems:
                print(f"provision: error: {len(problems)} of {plan.dims.learners} ranks not bound as planned", file=sys.stderr)
                return 1
            print(f"provision: all {plan.dims.learners} ranks bound as planned", file=sys.stderr)
        return status
    except LaunchError as error:
        print(f"provision: error: {host.name}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"provision: interrupted before mpirun started on {host.name}", file=sys.stderr)
        return INTERRUPTED
    except Exception as error:  # noqa: BLE001 - one line for the host, never a traceback
        print(f"provision: error: {host.name}: {describe_failure(error, options, connection)}", file=sys.stderr)
        return 1
    finally:
        if connection is not None:
            if run_dir is not None:
                # The connection may be gone; the directory is private.
                with contextlib.suppress(Exception, KeyboardInterrupt):
                    connection.run(f"rm -rf -- {shlex.quote(run_dir)}", hide=True, warn=True, in_stream=False, timeout=30)
            connection.close()
