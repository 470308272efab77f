"""The shipped roles' variables, as ``playbooks/role-variables.yml`` declares them beside the roles.

One declaration serves the documentation's reference page (generated from it at build time) and
the tests that keep it true to the playbooks. Example::

    >>> roles = load_roles()
    >>> roles["nfs"].variables["nfs_server"].default
    'unset (the role does nothing)'
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import yaml

from provision.errors import ProvisionError
from provision.resources import resource_dir

DECLARATION = "role-variables.yml"
FIELDS = ("type", "default", "example", "effect")


@dataclass(frozen=True)
class RoleVariable:
    """One variable: its name (``cluster_users[].uid`` for a field of a list's entries,
    ``slurm.conf`` for a key of a mapping), what its value is, what applies when it is unset, an
    example value and what changes on the nodes."""

    name: str
    type: str
    default: str
    example: str
    effect: str


@dataclass(frozen=True)
class Role:
    """A shipped role: its playbook file, the tags that run it alone, what it does, its variables."""

    name: str
    playbook: str
    tags: tuple[str, ...]
    summary: str
    variables: dict[str, RoleVariable]


@lru_cache(maxsize=1)
def load_roles() -> dict[str, Role]:
    """Every role of ``playbooks/role-variables.yml``, in the file's order."""
    path = resource_dir("playbooks") / DECLARATION
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster (read on every run)
    data = yaml.load(path.read_text(), Loader=loader)
    roles: dict[str, Role] = {}
    for name, role in data.items():
        variables = {}
        for var, spec in role["variables"].items():
            missing = [field for field in FIELDS if field not in spec]
            if missing:
                raise ProvisionError(f"{path}: {name}: {var}: missing {', '.join(missing)}")
            variables[var] = RoleVariable(var, *(str(spec[field]) for field in FIELDS))
        roles[name] = Role(name, role["playbook"], tuple(role["tags"]), role["summary"], variables)
    return roles
