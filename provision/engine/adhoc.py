"""`provision run` as an admin uses pdsh/clush: a command as root (``--become``: sudo, as
setup-cluster becomes), a file copied to every host (``--copy FILE --dest PATH``, as ``pdcp`` and
``clush --copy``), and the report with identical outputs folded under one host list (``--fold``,
as ``clush -b`` / ``dshbak -c``):

    ---------------- w[1-3] (3) | rc=0
    w[1-3]: Linux

The command runs through the same become wrapper as setup-cluster's round trips
(:func:`provision.engine.script.remote_command`): ``sudo -n`` without a password, the password
(``-K``) on stdin, never on a command line. The user's command gets ``/dev/null`` as stdin (the
script travels on the real one). A copy is written as setup-cluster writes a file, under the same
rules for paths a user controls (:func:`copy_script`); a folder at the destination is refused
unless the destination ends with ``/`` (then the file keeps its name).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from provision.engine.acting import on_stdin
from provision.engine.script import BECOME_FAILED, remote_command, stdin_for, write_command
from provision.errors import ArgumentError, ProvisionError
from provision.inventory.model import Host
from provision.inventory.targets import resolve_targets
from provision.operations.base import Write, check_path
from provision.operations.paths import walk_prelude
from provision.plans.hostlist import HostlistError, fold
from provision.text import shown, shown_value
from provision.transport.adhoc import AdhocResult, run_adhoc, typed_command
from provision.transport.options import SshOptions

COPY_LIMIT = 64 * 1024 * 1024  # bytes: a file to spread with pdcp, not a dataset (that is what NFS is for)


@dataclass(frozen=True)
class AdhocJob:
    """What ``provision run`` does on each host: ``command`` (shell text), or a copy of
    ``copy`` to ``dest``; as root with ``become`` (``password``: sudo's, from -K)."""

    command: str | None = None
    copy: Path | None = None
    dest: str | None = None
    become: bool = False
    password: str | None = None


@dataclass(frozen=True)
class AdhocRequest:
    """What ``provision run`` was asked: the ``hosts`` as typed (names, groups, patterns,
    comma-separated) of the ``inventory``; the program's words (``argv``) or the user's own
    ``shell`` text, or a file to ``copy`` to ``dest``; as root with ``become``."""

    hosts: str
    inventory: Path | None = None
    argv: tuple[str, ...] = ()
    shell: str | None = None
    copy: Path | None = None
    dest: str | None = None
    become: bool = False


@dataclass(frozen=True)
class AdhocRun:
    """What ran (``command``: the shell text; ``copy``: the file copied) and each host's result, in
    host order."""

    command: str | None
    copy: Path | None
    results: list[AdhocResult]


def run_request(
    request: AdhocRequest, options: SshOptions, forks: int, ask_password: Callable[[], str] | None = None
) -> AdhocRun:
    """One ``provision run``: the command or copy checked, the hosts resolved (a typo of an
    inventory name refused), the sudo password asked (``ask_password``, which also means
    --become), then :func:`run_job`. Bad input raises :class:`ProvisionError` before any host."""
    copying = request.copy is not None and not request.argv and request.shell is None
    try:
        text = None if copying else typed_command(list(request.argv), request.shell)
    except ValueError as error:
        raise ProvisionError(str(error)) from None
    _, targets = resolve_targets(request.inventory, [name.strip() for name in request.hosts.split(",") if name.strip()])
    if not targets:
        raise ProvisionError("no hosts: name some, or give an inventory with -i")
    if request.copy is not None and text is not None:
        raise ProvisionError("give a command or --copy FILE, not both")
    password = ask_password() if ask_password is not None else None
    job = AdhocJob(text, request.copy, request.dest, request.become or ask_password is not None, password)
    return AdhocRun(text, request.copy, run_job(targets, job, options, forks))


def copy_script(source: Path, dest: str, become: bool = False) -> str:
    """The script that writes ``source``'s bytes (and permission bits) at ``dest`` on a host,
    then says ``copied N bytes to PATH (sha256 ...)`` (``dest`` ending in ``/``: into that
    folder), or ``unchanged: ...`` when the file there already holds them (no backup then).

    The same rule as setup-cluster's writes (:mod:`provision.operations.paths`): the folders
    above the path are walked first; below a folder another user can write, the file is written
    **as that folder's owner** where one user owns it (with ``--become``: ``runuser``; her own
    permissions apply, a link she planted leads only where she could write anyway), else refused;
    in a sticky folder (``/tmp``) only a name that is absent or the writer's own is written. The
    write itself never follows a link (:func:`provision.engine.script.write_command`)."""
    try:  # the file the user named (a link to it is followed); never a device or FIFO read without end
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO's open waits for a writer
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise ProvisionError(f"--copy {shown_value(str(source))}: not a regular file (a device, FIFO or folder)")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(COPY_LIMIT + 1)
        mode = info.st_mode & 0o7777
    except OSError as error:
        raise ProvisionError(f"--copy {shown_value(str(source))}: cannot read it: {error.strerror}") from None
    if len(data) > COPY_LIMIT:
        raise ProvisionError(f"--copy {shown_value(str(source))}: over {COPY_LIMIT} bytes (share big files over NFS)")
    target = dest + source.name if dest.endswith("/") else dest
    try:
        path = check_path(target)
    except ArgumentError as error:
        raise ProvisionError(f"--dest: {error}") from None  # the error names the path, escaped: one line
    if path.startswith("~"):
        raise ProvisionError(f"--dest {shown_value(dest)}: give an absolute path (~user/ is for setup-cluster's tasks)")
    digest = hashlib.sha256(data).hexdigest()
    said = f"{len(data)} bytes (sha256 {digest[:16]}...)"
    write = (  # as the writer: the same bytes and mode there already: unchanged, nothing written
        f'p={shlex.quote(path)}; if [ -n "$S" ] && {{ [ -e "$p" ] || [ -L "$p" ]; }} && '
        '{ [ -L "$p" ] || [ ! -O "$p" ] || [ "$(stat -c %h -- "$p")" -ne 1 ]; }; then '
        'echo "refused: $p is in $F, a folder every user can write (sticky), and is not the writer\'s own" >&2; exit 1; fi\n'
        f'if [ -f "$p" ] && [ ! -L "$p" ] && [ "$(stat -c %s.%a -- "$p")" = {len(data)}.{mode:o} ] && '
        f'[ "$(dd if="$p" iflag=nofollow,nonblock bs=1M 2>/dev/null | sha256sum)" = "{digest}  -" ]; then '
        f"echo {shlex.quote(f'unchanged: {path} already holds these {said}')}; exit 0; fi\n"
        f"(\n{write_command(Write(path, data, mode=mode))}\n) || exit 1\n"
        f'echo {shlex.quote(f"copied {len(data)} bytes to {path} (sha256 {digest[:16]}...)")}"${{A:+ as $A}}"\n'
    )
    folder_check = (
        f'if [ -d "$p" ]; then echo {shlex.quote(f"{path} is a folder: end --dest with / to copy into it")} >&2; exit 1; fi'
    )
    as_owner = (  # below a folder one user owns: as her, when the path is then safe for her
        'if [ -n "$B" ] && [ -n "$W" ]; then IFS=: read -r A x u g x <<PROVISION_OWNER\n$(getent passwd "$W")\nPROVISION_OWNER\n'
        'if [ -n "$A" ]; then _pw "$p" "$u" "$g"; case $V in "") ;; sticky*) S=1 F=${V#*"$NL"};; *) A=;; esac; fi; fi\n'
    )
    hint = "" if become else "; with --become it is written as that folder's owner where one user owns it"
    return (
        f"p={shlex.quote(path)}; {folder_check}\n{walk_prelude([(0, path, '')], True if become else None)}"
        'A= B= S= F=${V_0#*"$NL"}; case $V_0 in "") ;; sticky*) S=1;; below*) B=1;; '
        '*) w=${V_0#*|*|}; case ${w%%|*} in changed) w="a name on its way changed while it was read, run again";; '
        'links) w="it leads through more than 40 links, or a link with a control character";; '
        '*) w="it leads through more than 64 names (a link loop?), or a name over 1024 bytes";; esac; '
        'echo "refused: $p could not be checked: $w ($F)" >&2; exit 1;; esac\n'
        + (as_owner if become else "")
        + 'if [ -n "$B" ] && [ -z "$A" ]; then m=${V_0#*|}; o=${m#*|}; a=${o#*|*|}; case ${a%%"$NL"*} in '
        + 'acl) a=" and an ACL";; *) a=;; esac; '
        + 'echo "refused: $p is below $F, a folder another user can write (owner ${o%%|*}, mode ${m%%|*}$a)'
        + f'{hint}" >&2; exit 1; fi\n'
        + "export S F A\n"  # the write: as the folder's owner (her sh, on stdin) or as the script's user
        + 'if [ -n "$A" ]; then set -- runuser -u "$A" -- sh -s; else set -- sh -s; fi\n'
        + on_stdin('"$@"', write, "PROVISION_COPY")
        + "\n"
    )


def run_job(hosts: list[Host], job: AdhocJob, options: SshOptions, forks: int) -> list[AdhocResult]:
    """Run ``job`` on every host, at most ``forks`` at once; results in host order. Bad input
    (an unreadable file, a bad destination) raises :class:`ProvisionError` before any host."""
    if job.copy is not None:
        if not job.dest:
            raise ProvisionError("--copy needs --dest PATH (a file path, or a folder ending in /)")
        script = copy_script(job.copy, job.dest, job.become)
    elif job.command is not None:
        if job.dest:
            raise ProvisionError("--dest goes with --copy FILE")
        script = f"exec sh -c {shlex.quote(job.command)} </dev/null\n"
    else:
        raise ProvisionError("no command: put it after --, or give --copy FILE --dest PATH")
    if not job.become and job.copy is None:
        return run_adhoc(hosts, job.command, options, forks)
    try:
        stdin = stdin_for(script, job.become, job.password)
    except ValueError as error:
        raise ProvisionError(str(error)) from None
    results = run_adhoc(hosts, remote_command(job.become), options, forks, stdin=stdin)
    return [_become_refused(result) if job.become else result for result in results]


def _become_refused(result: AdhocResult) -> AdhocResult:
    """sudo's own refusal, told apart from the command's failure."""
    said = result.stderr.strip().splitlines()
    refused = result.exit_code == BECOME_FAILED or (result.exit_code == 1 and said and said[0].startswith("sudo:"))
    if not refused:
        return result
    why = said[0] if said else "sudo refused the password"
    return replace(
        result,
        error_kind="become",
        error=f"{why} (give the sudo password with -K/--ask-become-pass, or allow the login user to sudo)",
    )


def _node_lines(text: str) -> list[str]:
    """A host's output as lines, each escaped (:func:`shown`; already done by the transport, done
    again here so that no caller can forget it): a line break is the only thing that splits."""
    lines = text.split("\n") if text else []
    if text.endswith("\n"):
        lines.pop()
    return [shown(line) for line in lines]


def report_lines(results: list[AdhocResult], folded: bool) -> list[tuple[bool, str]]:
    """``(to stderr, line)`` to print: each host's ``HOST | rc=N``, then each line of its output
    headed by its host (``HOST: ...``, as pdsh prints, stderr's on stderr); with ``folded``, hosts
    with the same exit status and output share one block headed by their host list
    (``w[1-3] (3)``), each of its lines headed by that list. A node's text never starts a line:
    one node cannot print a block that looks like another's (``n2 | rc=0``)."""
    lines: list[tuple[bool, str]] = []
    if not folded:
        for result in results:
            if result.error_kind is not None:
                lines.append((True, shown(f"{result.host} | {result.error_kind}: {result.error}", newlines=False)))
                continue
            lines.append((False, f"{result.host} | rc={result.exit_code}"))
            lines.extend((False, f"{result.host}: {text}") for text in _node_lines(result.stdout))
            lines.extend((True, f"{result.host}: {text}") for text in _node_lines(result.stderr))
        return lines
    groups: dict[tuple, list[str]] = {}
    for result in results:
        key = (result.error_kind, result.error, result.exit_code, result.stdout, result.stderr)
        groups.setdefault(key, []).append(result.host)
    for (kind, error, code, stdout, stderr), names in groups.items():
        try:
            label = fold(names)
        except HostlistError:
            label = ",".join(names)
        head = f"---------------- {label} ({len(names)})"
        if kind is not None:
            lines.append((True, shown(f"{head} | {kind}: {error}", newlines=False)))
            continue
        lines.append((False, f"{head} | rc={code}"))
        lines.extend((False, f"{label}: {text}") for text in _node_lines(stdout))
        lines.extend((False, f"{label}: stderr: {text}") for text in _node_lines(stderr))
    return lines
