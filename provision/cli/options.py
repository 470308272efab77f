"""Options shared by several commands, declared once."""

from __future__ import annotations

from pathlib import Path

import typer

from provision.factstore import DEFAULT_FACTS_DIR
from provision.probe import DEFAULT_FORKS

INVENTORY = typer.Option(None, "-i", "--inventory", help="Inventory YAML (default: inventory/hosts.yml if present).")
FACTS_DIR = typer.Option(DEFAULT_FACTS_DIR, "--facts-dir", help="Where facts are cached (<host>.json + raw captures).")
FORKS = typer.Option(DEFAULT_FORKS, "--forks", min=1, max=1024, help="Hosts probed at once.")
CONNECT_TIMEOUT = typer.Option(10.0, "--connect-timeout", min=0.1, help="Seconds to wait for an SSH connection.")
ACCEPT_NEW = typer.Option(
    False, "--accept-new-host-keys", help="Record unknown host keys in known_hosts (changed keys are still refused)."
)
KNOWN_HOSTS = typer.Option(Path("~/.ssh/known_hosts"), "--known-hosts", help="known_hosts file to trust and append to.")
SSH_CONFIG = typer.Option(None, "--ssh-config", help="ssh_config file to read instead of ~/.ssh/config.")


def ssh_options(known_hosts: Path, accept_new: bool, connect_timeout: float, ssh_config: Path | None):
    """Build :class:`SshOptions` from the shared CLI options."""
    from provision.connection import SshOptions

    return SshOptions(
        known_hosts=Path(known_hosts).expanduser(),
        accept_new_host_keys=accept_new,
        connect_timeout=connect_timeout,
        ssh_config=ssh_config,
    )
