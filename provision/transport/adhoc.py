"""Ad-hoc commands (`provision run`): one command on many hosts, fanned out, one result per host.

The command is an argument vector joined with :func:`shlex.join`, so every word reaches the
remote program exactly as typed (``provision run gpu -- grep 'a b' /etc/hosts``); only
``shell=`` text (``--shell``), which the user writes as shell on purpose, is passed as it is.
Output is the host's: control characters other than tab and newline are made visible before
it reaches a terminal.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from provision.inventory.model import Host
from provision.text import shown
from provision.transport.options import HostFailure, SshOptions
from provision.transport.parallel import fan_out


@dataclass(frozen=True)
class AdhocResult:
    """One host's answer: its exit status and output, or why it could not run the command."""

    host: str
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    error_kind: str | None = None  # unreachable, timeout, auth, hostkey, key, ssh
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Ran and exited 0."""
        return self.exit_code == 0


def typed_command(argv: list[str] | None, shell: str | None) -> str:
    """The remote command: ``argv`` quoted word by word, or the user's own ``shell`` text."""
    if shell is not None:
        if argv:
            raise ValueError("give the command after -- or as --shell TEXT, not both")
        return shell
    if not argv:
        raise ValueError("no command: put it after --, e.g. provision run all -- uptime")
    return shlex.join(argv)


def run_adhoc(hosts: list[Host], command: str, options: SshOptions, forks: int, stdin: bytes | None = None) -> list[AdhocResult]:
    """Run ``command`` on every host (``stdin`` written to it, else closed at once), at most
    ``forks`` at once; results in host order. An unreachable or failing host never stops the others."""
    from provision.transport.connection import describe_failure, run_command  # SSH: imported when it is used

    def work(host: Host) -> AdhocResult:
        try:
            done = run_command(host, command, options, stdin)
        except HostFailure as failure:
            return AdhocResult(host.name, error_kind=failure.kind, error=str(failure))
        return AdhocResult(host.name, done.exit_code, shown(done.stdout), shown(done.stderr))

    def on_error(host: Host, error: BaseException) -> AdhocResult:
        failure = describe_failure(error, options)
        return AdhocResult(host.name, error_kind=failure.kind, error=str(failure))

    return fan_out(hosts, work, forks, on_error=on_error)
