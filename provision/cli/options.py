"""Options shared by several commands, declared once as ``Annotated`` aliases, and the settings
they make, built once per command by :func:`settings`.

Every shared setting has one meaning everywhere and is read from the command line, else its
environment variable, else the config files, else its built-in default (:mod:`provision.cli.config`;
defaults in :mod:`provision.defaults`)::

    def probe(ctx: typer.Context, inventory: opt.Inventory, forks: opt.Forks, ...):
        ssh = opt.settings(ctx).ssh
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from provision import defaults
from provision.cli import config
from provision.errors import ProvisionError
from provision.text import shown_value

if TYPE_CHECKING:
    from provision.transport.options import SshOptions


def _setting(name: str, *flags: str, **kwargs) -> typer.models.OptionInfo:
    """An option read from the command line, else its environment variable, else the config
    files, else its default (:mod:`provision.cli.config` decides all but the command line)."""
    return typer.Option(
        *flags,
        default_factory=lambda: config.configured(name),
        envvar=config.env_name(name),
        **kwargs,
    )


Inventory = Annotated[
    Path,
    _setting(
        "inventory", "-i", "--inventory", help="Inventory YAML (default: inventory/hosts.yml if present).", show_default=False
    ),
]


def facts_dir_named(ctx: typer.Context) -> bool:
    """True when the command line, the environment or a config file named the facts folder."""
    source = ctx.get_parameter_source("facts_dir")
    return (source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")) or config.is_configured("facts_dir")


def _facts_dir(ctx: typer.Context, param: typer.CallbackParam, value: Path | None) -> Path | None:
    """An unnamed facts folder is the one beside the inventory (:func:`facts_folder`): the
    inventory option is declared first, so it is known here when only the default is left."""
    return value if facts_dir_named(ctx) else _facts_beside(ctx.params.get("inventory"))


def _facts_beside(inventory: Path | None) -> Path:
    from provision.defaults import facts_folder
    from provision.inventory.model import DEFAULT_INVENTORY

    if inventory is None and DEFAULT_INVENTORY.exists():
        inventory = DEFAULT_INVENTORY
    return facts_folder(inventory)


FactsDir = Annotated[
    Path,
    _setting(
        "facts_dir",
        "--facts-dir",
        help="Where facts are cached (<host>.json + raw captures); default: facts/ beside the inventory.",
        show_default=str(defaults.FACTS_DIR),
        callback=_facts_dir,
    ),
]


def _forks(meaning: str):
    """``--forks``: one setting (``forks``, PROVISION_FORKS, the config's ``forks``) with the help
    saying what it bounds in that command."""
    return Annotated[int, _setting("forks", "--forks", min=1, max=1024, help=meaning, show_default=str(defaults.FORKS))]


Forks = _forks("Hosts probed at once (in all, over every worker process).")
RunForks = _forks(
    "Hosts that run the command (or receive the copy) at once: one SSH connection each; "
    "lower it to spare a login node or a file server."
)
SetupForks = _forks("Hosts worked on at once.")
Workers = Annotated[
    int,
    typer.Option(
        "--workers",
        min=0,
        max=256,
        help="Controller processes sharing the hosts (0: automatic, one per core from 200 hosts on, with 4 cores or more).",
    ),
]
ConnectTimeout = Annotated[
    float,
    _setting(
        "connect_timeout",
        "--connect-timeout",
        min=0.1,
        help="Seconds (fractions allowed) to wait for each SSH connection, ProxyJump hops included.",
        show_default=f"{defaults.CONNECT_TIMEOUT:g}",
    ),
]
CommandTimeout = Annotated[
    float,
    _setting(
        "command_timeout",
        "--command-timeout",
        min=0.1,
        help="Seconds one command may run on a host (in setup-cluster each change is one command).",
        show_default=f"{defaults.COMMAND_TIMEOUT:g}",
    ),
]
AcceptNew = Annotated[
    bool,
    _setting(
        "accept_new_host_keys",
        "--accept-new-host-keys",
        help="Record unknown host keys in the first user known_hosts file (changed and revoked keys are still refused).",
        show_default=False,
    ),
]
KnownHosts = Annotated[
    Path,
    _setting(
        "known_hosts",
        "--known-hosts",
        help="known_hosts file to trust and append to, instead of ssh_config's UserKnownHostsFile (default ~/.ssh/known_hosts); "
        "global files (/etc/ssh/ssh_known_hosts) still apply.",
        show_default=False,
    ),
]
SshConfig = Annotated[
    Path,
    _setting(
        "ssh_config",
        "--ssh-config",
        help="ssh_config file to read instead of ~/.ssh/config and /etc/ssh/ssh_config.",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class Settings:
    """The shared settings of one command run, built once from its options: how to reach hosts
    (:attr:`ssh`), how many at once (``forks``), controller processes (``workers``, None:
    automatic), where facts are cached and which inventory is read."""

    forks: int
    workers: int | None
    facts_dir: Path
    inventory: Path | None
    known_hosts: Path | None
    ssh_config: Path | None
    accept_new_host_keys: bool
    connect_timeout: float
    command_timeout: float

    @cached_property
    def ssh(self) -> SshOptions:
        """The SSH options (SSH is imported here, when a command reaches a host: not for --replay)."""
        from provision.transport.options import SshOptions

        return SshOptions(
            known_hosts=self.known_hosts,
            accept_new_host_keys=self.accept_new_host_keys,
            connect_timeout=self.connect_timeout,
            command_timeout=self.command_timeout,
            ssh_config=self.ssh_config,
        )


def settings(ctx: typer.Context) -> Settings:
    """The :class:`Settings` of the running command, from its shared options (``ctx.params``);
    a setting the command has no option for comes from the environment, the config files or its
    default, as the option would. Built once per command run (kept in ``ctx.meta``). An
    unreadable --ssh-config: one line, exit 2."""
    if "provision.settings" not in ctx.meta:
        ctx.meta["provision.settings"] = _settings(ctx.params)
    return ctx.meta["provision.settings"]


def _settings(params: dict) -> Settings:
    """:class:`Settings` from the parsed options ``params``."""

    def value(name: str):
        if name in params:  # as click parsed it (typer converts to the annotation only for the function)
            given, kind = params[name], config.SETTINGS[name].kind
            return given if given is None or isinstance(given, kind) else kind(given)
        setting = config.SETTINGS[name]
        if setting.env in os.environ:
            return _from_env(name, os.environ[setting.env])
        return config.configured(name)

    ssh_config = value("ssh_config")
    if ssh_config is not None:
        try:
            with open(ssh_config, "rb"):
                pass
        except OSError as error:
            raise ProvisionError(f"{ssh_config}: cannot read ssh_config: {error.strerror}") from None
    known_hosts = value("known_hosts")
    return Settings(
        forks=value("forks"),
        workers=params.get("workers") or None,
        facts_dir=value("facts_dir")
        if "facts_dir" in params or config.is_configured("facts_dir")
        else _facts_beside(value("inventory")),
        inventory=value("inventory"),
        known_hosts=Path(known_hosts).expanduser() if known_hosts is not None else None,
        ssh_config=ssh_config,
        accept_new_host_keys=bool(value("accept_new_host_keys")),
        connect_timeout=value("connect_timeout"),
        command_timeout=value("command_timeout"),
    )


def _from_env(name: str, text: str):
    """An environment variable's value as its setting's type (as the option would read it)."""
    kind = config.SETTINGS[name].kind
    if kind is bool:
        return text.strip().lower() in ("1", "true", "yes", "on", "y", "t")
    try:
        return kind(text)
    except ValueError:
        raise ProvisionError(f"${config.env_name(name)}={shown_value(text)}: not a valid {name.replace('_', '-')}") from None
