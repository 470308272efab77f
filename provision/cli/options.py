"""Options shared by several commands, declared once."""

from __future__ import annotations

from pathlib import Path

import typer

from provision.cli import config
from provision.errors import ProvisionError
from provision.inventory.model import DEFAULT_INVENTORY
from provision.probe.cached import ProbeSettings
from provision.probe.run import DEFAULT_FORKS
from provision.probe.store import DEFAULT_FACTS_DIR, facts_folder
from provision.transport.connection import SshOptions


def _setting(name: str, *flags: str, **kwargs) -> typer.models.OptionInfo:
    """An option read from the command line, else its environment variable, else the config
    files, else its default (:mod:`provision.cli.config` decides all but the command line)."""
    return typer.Option(
        ...,
        *flags,
        default_factory=lambda: config.configured(name),
        envvar=config.env_name(name),
        **kwargs,
    )


INVENTORY = _setting(
    "inventory",
    "-i",
    "--inventory",
    help="Inventory YAML (default: inventory/hosts.yml if present).",
    show_default=False,
)


def _facts_dir(ctx: typer.Context, param: typer.CallbackParam, value: Path | None) -> Path | None:
    """An unnamed facts folder is the one beside the inventory (:func:`facts_folder`): the
    inventory option is declared first, so it is known here when only the default is left."""
    source = ctx.get_parameter_source(param.name)
    if (source is not None and source.name != "DEFAULT") or config.is_configured("facts_dir"):
        return value
    inventory = ctx.params.get("inventory")
    if inventory is None and DEFAULT_INVENTORY.exists():
        inventory = DEFAULT_INVENTORY
    return facts_folder(inventory)


FACTS_DIR = _setting(
    "facts_dir",
    "--facts-dir",
    help="Where facts are cached (<host>.json + raw captures); default: facts/ beside the inventory.",
    show_default=str(DEFAULT_FACTS_DIR),
    callback=_facts_dir,
)
FORKS = _setting(
    "forks",
    "--forks",
    min=1,
    max=1024,
    help="Hosts probed at once (in all, over every worker process).",
    show_default=str(DEFAULT_FORKS),
)
RUN_FORKS = _setting(
    "forks",
    "--forks",
    min=1,
    max=1024,
    help="Hosts that run the command (or receive the copy) at once: one SSH connection each; "
    "lower it to spare a login node or a file server.",
    show_default=str(DEFAULT_FORKS),
)
SETUP_FORKS = _setting("forks", "--forks", min=1, max=1024, help="Hosts worked on at once.", show_default=str(DEFAULT_FORKS))
WORKERS = typer.Option(
    0,
    "--workers",
    min=0,
    max=256,
    help="Controller processes sharing the hosts (0: automatic, one per core from a few hundred hosts on).",
)
CONNECT_TIMEOUT = _setting(
    "connect_timeout",
    "--connect-timeout",
    min=0.1,
    help="Seconds (fractions allowed) to wait for each SSH connection, ProxyJump hops included.",
    show_default=f"{SshOptions.connect_timeout:g}",
)
COMMAND_TIMEOUT = _setting(
    "command_timeout",
    "--command-timeout",
    min=0.1,
    help="Seconds the remote command may run.",
    show_default=f"{SshOptions.command_timeout:g}",
)
ACCEPT_NEW = _setting(
    "accept_new_host_keys",
    "--accept-new-host-keys",
    help="Record unknown host keys in the first user known_hosts file (changed and revoked keys are still refused).",
    show_default=False,
)
KNOWN_HOSTS = _setting(
    "known_hosts",
    "--known-hosts",
    help="known_hosts file to trust and append to, instead of ssh_config's UserKnownHostsFile (default ~/.ssh/known_hosts); "
    "global files (/etc/ssh/ssh_known_hosts) still apply.",
    show_default=False,
)
SSH_CONFIG = _setting(
    "ssh_config",
    "--ssh-config",
    help="ssh_config file to read instead of ~/.ssh/config and /etc/ssh/ssh_config.",
    show_default=False,
)


def ssh_options(
    known_hosts: Path | None,
    ssh_config: Path | None,
    *,
    accept_new: bool = False,
    connect_timeout: float = SshOptions.connect_timeout,
    command_timeout: float = SshOptions.command_timeout,
) -> SshOptions:
    """Build :class:`SshOptions` from the shared CLI options (an unreadable --ssh-config: one line, exit 2)."""
    if ssh_config is not None:
        try:
            with open(ssh_config, "rb"):
                pass
        except OSError as error:
            raise ProvisionError(f"{ssh_config}: cannot read ssh_config: {error.strerror}") from None
    return SshOptions(
        known_hosts=Path(known_hosts).expanduser() if known_hosts is not None else None,
        accept_new_host_keys=accept_new,
        connect_timeout=connect_timeout,
        command_timeout=command_timeout,
        ssh_config=ssh_config,
    )


def probe_settings(
    forks: int,
    connect_timeout: float,
    command_timeout: float,
    accept_new: bool,
    known_hosts: Path | None,
    ssh_config: Path | None,
    workers: int | None = None,
) -> ProbeSettings:
    """Build :class:`ProbeSettings` (SSH options, forks, worker processes) from the shared CLI options."""
    ssh = ssh_options(
        known_hosts, ssh_config, accept_new=accept_new, connect_timeout=connect_timeout, command_timeout=command_timeout
    )
    return ProbeSettings(ssh, forks, workers or None)
