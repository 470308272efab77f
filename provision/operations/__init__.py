"""Idempotent operations (pyinfra's contract): pure functions from arguments and host facts to
changes. The registry :data:`OPERATIONS` maps each name a playbook may use to its operation."""

from __future__ import annotations

# role_state and os_state register state kinds when imported
from provision.operations import conda, files, jupyter, nfs, os_state, role_state, ssh, system, users  # noqa: F401
from provision.operations.base import Operation

OPERATIONS: dict[str, Operation] = {
    **files.OPERATIONS,
    **users.OPERATIONS,
    **system.OPERATIONS,
    **ssh.OPERATIONS,
    **nfs.OPERATIONS,
    **conda.OPERATIONS,
    **jupyter.OPERATIONS,
}
