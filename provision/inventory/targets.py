"""Host names a user typed (a command's arguments), checked against the inventory before anything
is tried.

A name the inventory does not know is still an ad-hoc host (reached by name, ~/.ssh/config
applying), except when it looks like a typo of an inventory host or group: then the command
stops before any DNS lookup or SSH attempt and says which name was probably meant.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from provision.errors import ProvisionError
from provision.inventory.model import HOST_NAME, Host, Inventory, open_inventory


def suggestion(inventory: Inventory, name: str) -> str | None:
    """``did you mean w1?`` for a plain name close to an inventory host or group, else None."""
    known = [*inventory.hosts, *inventory.groups, "all"]
    if name in known or not HOST_NAME.match(name):  # patterns (w[1:3], gpu:!w3) are the resolver's
        return None
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)  # 0.5: one letter off in a 2-letter name
    if not close:
        return None
    close.sort(key=lambda match: (-difflib.SequenceMatcher(None, name, match).ratio(), known.index(match)))
    return "did you mean " + " or ".join(close) + "?"


def refuse_typos(inventory: Inventory, names: list[str]) -> None:
    """Raise naming the first name that is not in the inventory but close to a name that is."""
    if inventory.path is None:
        return
    for name in names:
        hint = suggestion(inventory, name)
        if hint:
            raise ProvisionError(
                f"{name}: not a host or group in {inventory.path} ({hint}); "
                f"a host outside the inventory must not look like one of its names: add it under hosts:"
            )


def resolve_targets(inventory_path: Path | None, names: list[str]) -> tuple[Inventory, list[Host]]:
    """The inventory and the hosts ``names`` choose (all when empty), typos refused first."""
    inventory = open_inventory(inventory_path)
    refuse_typos(inventory, names)
    return inventory, inventory.resolve(names)
