"""Options shared by several commands, declared once."""

from __future__ import annotations

from pathlib import Path

import typer

from provision.connection import SshOptions
from provision.factstore import DEFAULT_FACTS_DIR
from provision.probe import DEFAULT_FORKS

INVENTORY = typer.Option(None, "-i", "--inventory", help="Inventory YAML (default: inventory/hosts.yml if present).")
FACTS_DIR = typer.Option(DEFAULT_FACTS_DIR, "--facts-dir", help="Where facts are cached (<host>.json + raw captures).")
FORKS = typer.Option(DEFAULT_FORKS, "--forks", min=1, max=1024, help="Hosts probed at once.")
CONNECT_TIMEOUT = typer.Option(SshOptions.connect_timeout, "--connect-timeout", min=0.1, help="Seconds to wait for an SSH connection.")
ACCEPT_NEW = typer.Option(
    False, "--accept-new-host-keys", help="Record unknown host keys in known_hosts (changed keys are still refused)."
)
KNOWN_HOSTS = typer.Option(Path("~/.ssh/known_hosts"), "--known-hosts", help="known_hosts file to trust and append to.")
SSH_CONFIG = typer.Option(None, "--ssh-config", help="ssh_config file to read instead of ~/.ssh/config.")


def ssh_options(known_hosts: Path, ssh_config: Path | None, *, accept_new: bool = False,
                connect_timeout: float = SshOptions.connect_timeout) -> SshOptions:
    """Build :class:`SshOptions` from the shared CLI options."""
    return SshOptions(
        known_hosts=Path(known_hosts).expanduser(),
        accept_new_host_keys=accept_new,
        connect_timeout=connect_timeout,
        ssh_config=ssh_config,
    )
