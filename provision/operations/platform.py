"""What differs between OS families, chosen on each node by its ``os`` fact (``/etc/os-release``).

An argument may name one value per family, ``{debian: nfs-common, rhel: nfs-utils}``: the
operation reads the facts of every alternative (so a converged host still costs one round trip)
and the ``os`` fact, and plans with the one of the node's family. A node of a family the
argument does not name is an error naming its ``ID`` and ``ID_LIKE``, never a guess.
Used for the NFS packages (Debian ``nfs-kernel-server`` / ``nfs-common``, RHEL ``nfs-utils``),
the kernel NFS server's unit (``nfs-kernel-server`` / ``nfs-server``) and the system bashrc that
non-interactive SSH sessions read (``/etc/bash.bashrc`` / ``/etc/bashrc``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provision.errors import ArgumentError
from provision.operations.base import OperationError, StateKey
from provision.operations.os_state import os_family
from provision.text import shown_value

OS = StateKey("os")
FAMILIES = ("debian", "rhel")


def alternatives(value: Any, what: str) -> list:
    """Every value ``value`` may stand for: itself, or each family's (keys checked)."""
    if not isinstance(value, dict):
        return [value]
    unknown = sorted(set(value) - set(FAMILIES))
    if unknown or not value:
        raise ArgumentError(f"{what}: per-family values take the keys {', '.join(FAMILIES)}, not {unknown or 'none'}")
    return list(value.values())


def per_family(*values: Any) -> bool:
    """Whether any of ``values`` is a per-family mapping (the operation then needs the ``os`` fact)."""
    return any(isinstance(value, dict) for value in values)


def for_node(value: Any, current: Mapping[StateKey, Any], what: str) -> Any:
    """``value``, or its node's family's value; :class:`OperationError` when the family has none."""
    if not isinstance(value, dict):
        return value
    alternatives(value, what)
    release = current.get(OS)
    family = os_family(release)
    if family not in value:
        got = f"ID={shown_value(release.id)} ID_LIKE={shown_value(' '.join(release.like))}" if release else "no /etc/os-release"
        known = ", ".join(sorted(value))
        raise OperationError(f"{what}: this node's OS ({got}, family {family}) is not one of {known}")
    return value[family]
