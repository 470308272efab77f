"""The cluster users of one setup-cluster run, as every consumer after the tasks needs them (the
pair check, ``--ask-jupyter-pass``, ``--rotate-user-keys``): the present users of each host, read
through :class:`provision.playbook.variables.Variables` (one source of truth: the inventory's
``vars:``, ``group_vars/``, ``host_vars/`` and ``-e`` alike), checked across hosts."""

from __future__ import annotations

from dataclasses import dataclass

from provision.inventory.model import Host
from provision.playbook.variables import VariableError, Variables, cluster_users_by_host


@dataclass(frozen=True)
class RunUsers:
    """``by_host``: each host's present cluster users; ``users``: every present user once (by
    name); ``unset``: the hosts whose variables set no ``cluster_users`` at all."""

    by_host: dict[str, list[dict]]
    users: list[dict]
    unset: list[str]

    def check_rotation(self, rotate: list[str]) -> None:
        """Refuse (:class:`VariableError`) a user to rotate who is not a present cluster user."""
        unknown = sorted(set(rotate) - {user["name"] for user in self.users})
        if unknown:
            raise VariableError(f"--rotate-user-keys: {', '.join(unknown)} not in cluster_users (present)")


def run_users(variables: Variables, hosts: list[Host]) -> RunUsers:
    """The present cluster users of ``hosts`` (errors as :func:`cluster_users_by_host`)."""
    every = cluster_users_by_host(variables, hosts)
    by_host = {name: [u for u in users if u.get("state", "present") != "absent"] for name, users in every.items()}
    users = list({user["name"]: user for host_users in by_host.values() for user in host_users}.values())
    unset = [host.name for host in hosts if variables.source(host, "cluster_users") is None]
    return RunUsers(by_host, users, unset)


def rotation_names(text: str | None, limited: bool) -> list[str]:
    """The users ``--rotate-user-keys`` names (comma-separated); refused with ``--limit``: the new
    keys must reach every node in the same run, and the old ones leave every node."""
    names = [name.strip() for name in (text or "").split(",") if name.strip()]
    if names and limited:
        raise VariableError("--rotate-user-keys replaces keys on every node: run it without --limit")
    return names
