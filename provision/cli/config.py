"""Settings users repeat, decided in one place: command line > environment > config file > default.

Config files (TOML, top-level keys named as the options, ``facts_dir = "inventory/facts"``)::

    $PROVISION_CONFIG                       # only this file, when set (it must exist)
    ~/.config/provision/config.toml         # ($XDG_CONFIG_HOME/provision/config.toml) the user's
    ./provision.toml                        # the project's, beside inventory/; wins over the user's

A relative path in a config file is relative to that file's folder. An unknown key or a value of
the wrong type is refused naming the file and key. The environment variables are
:data:`SETTINGS`' ``env`` names (``PROVISION_INVENTORY``, ``PROVISION_FACTS_DIR``,
``PROVISION_FORKS``...); the command line reads them through its options' ``envvar``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from provision import defaults
from provision.errors import ProvisionError
from provision.text import shown_value

PROJECT_FILE = Path("provision.toml")
CONFIG_ENV = "PROVISION_CONFIG"


@dataclass(frozen=True)
class Setting:
    """One setting: its environment variable, its type in a config file, its built-in default."""

    env: str
    kind: type
    default: Any


SETTINGS: dict[str, Setting] = {
    "inventory": Setting("PROVISION_INVENTORY", Path, None),
    "facts_dir": Setting("PROVISION_FACTS_DIR", Path, defaults.FACTS_DIR),
    "forks": Setting("PROVISION_FORKS", int, defaults.FORKS),
    "connect_timeout": Setting("PROVISION_CONNECT_TIMEOUT", float, defaults.CONNECT_TIMEOUT),
    "command_timeout": Setting("PROVISION_COMMAND_TIMEOUT", float, defaults.COMMAND_TIMEOUT),
    "accept_new_host_keys": Setting("PROVISION_ACCEPT_NEW_HOST_KEYS", bool, False),
    "known_hosts": Setting("PROVISION_KNOWN_HOSTS", Path, None),
    "ssh_config": Setting("PROVISION_SSH_CONFIG", Path, None),
}


class ConfigError(ProvisionError):
    """A config file that cannot be read or holds a bad key or value; names the file."""


def config_files() -> list[Path]:
    """The config files that apply, lowest precedence first."""
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"{path}: no such config file (named by ${CONFIG_ENV})")
        return [path]
    home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [path for path in (home / "provision" / "config.toml", PROJECT_FILE) if path.is_file()]


def _checked(path: Path, key: str, value: Any) -> Any:
    """``value`` of ``key`` from ``path`` as its setting's type (paths relative to the file's folder)."""
    setting = SETTINGS.get(key)
    if setting is None:
        raise ConfigError(f"{path}: unknown key {shown_value(key)} (known: {', '.join(SETTINGS)})")
    kind = setting.kind
    if kind is Path and isinstance(value, str) and value:
        expanded = Path(value).expanduser()
        return expanded if expanded.is_absolute() else path.parent / expanded
    if kind is bool and isinstance(value, bool):
        return value
    if kind is int and isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    wanted = {Path: "a path (string)", bool: "true or false", int: "a whole number >= 1", float: "a number of seconds > 0"}
    raise ConfigError(f"{path}: {key} = {shown_value(value)}: expected {wanted[kind]}")


def _read(path: Path) -> str:
    """A config file's text. The current folder's ``provision.toml`` may be someone else's (a shared
    project folder, /tmp) and it can name the ssh_config (ProxyCommand runs commands) and the
    inventory provision uses: it is read only when it is a regular file, not a link, owned by
    you or root (:func:`provision.files.read_regular`); else one line naming it (exit 2)."""
    if path != PROJECT_FILE:  # the user's own (XDG) file, or the one $PROVISION_CONFIG names
        return path.read_text()
    from provision.errors import UnsafeFileError
    from provision.files import read_regular

    try:
        return read_regular(path, owners=(os.getuid(), 0)).decode(errors="replace")
    except UnsafeFileError as error:
        raise ConfigError(f"{error}; a provision.toml here is read only when it is yours or root's, not a link") from None


@lru_cache(maxsize=8)
def _load(files: tuple[Path, ...]) -> dict[str, tuple[Any, Path]]:
    if not files:
        return {}
    if sys.version_info >= (3, 11):  # imported here: most runs have no config file (start-up)
        import tomllib
    else:  # Python 3.10: the same parser, from PyPI (a conditional dependency in pyproject.toml)
        import tomli as tomllib
    values: dict[str, tuple[Any, Path]] = {}
    for path in files:
        try:
            data = tomllib.loads(_read(path))
        except OSError as error:
            raise ConfigError(f"{path}: cannot read: {error.strerror}") from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path}: not valid TOML: {error}") from None
        for key, value in data.items():
            values[key.replace("-", "_")] = (_checked(path, key.replace("-", "_"), value), path)
    return values


def file_values() -> dict[str, tuple[Any, Path]]:
    """{setting: (value, the file that set it)} from every config file, the later file winning."""
    return _load(tuple(config_files()))


def configured(name: str) -> Any:
    """The config files' value of ``name``, else its built-in default (the environment and the
    command line are applied on top by the options, :mod:`provision.cli.options`)."""
    found = file_values().get(name)
    return found[0] if found is not None else SETTINGS[name].default


def is_configured(name: str) -> bool:
    """True when the environment or a config file sets ``name``."""
    return SETTINGS[name].env in os.environ or name in file_values()


def env_name(name: str) -> str:
    """The environment variable of setting ``name``."""
    return SETTINGS[name].env
