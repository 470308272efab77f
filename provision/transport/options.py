"""What a connection needs and what it reports, as plain data: no SSH library is imported here.

Every command imports these at its start (options parsed, settings built); Fabric and paramiko
(about 70 ms to import, most of a command's start-up) are imported only by
:mod:`provision.transport.connection`, when a command first connects.

>>> SshOptions(connect_timeout=5).command_timeout == defaults.COMMAND_TIMEOUT
True
>>> HostFailure("timeout", "s1: no answer in 5 s").kind
'timeout'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from provision import defaults


@dataclass(frozen=True)
class SshOptions:
    """How to connect: known_hosts and its policy, time limits (seconds), which ssh config to read."""

    known_hosts: Path | None = None  # None: UserKnownHostsFile from ssh_config, else ~/.ssh/known_hosts{,2}
    accept_new_host_keys: bool = False
    connect_timeout: float = defaults.CONNECT_TIMEOUT
    command_timeout: float = defaults.COMMAND_TIMEOUT
    ssh_config: Path | None = None  # None: ~/.ssh/config and /etc/ssh/ssh_config, as ssh does


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it exited."""

    stdout: str
    stderr: str
    exit_code: int


class HostFailure(Exception):
    """A host could not run the command. ``kind``: unreachable, timeout, auth, hostkey, key, ssh."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)
