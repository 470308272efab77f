"""Where a plan's facts come from: the facts folder, or a probe made now (then saved).

This is the one place where data climbs back up the layers (plans need facts; ``--probe`` gets
them over SSH first), so the decision lives here, below the CLI, with every SSH setting of the
probe in one :class:`ProbeSettings` object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from provision.errors import ProvisionError
from provision.facts.model import HostFacts
from provision.inventory.model import Inventory, open_inventory
from provision.probe.run import DEFAULT_FORKS, probe_hosts
from provision.probe.store import load_host, save_hosts
from provision.transport.options import SshOptions


@dataclass(frozen=True)
class ProbeSettings:
    """How to probe: the SSH options (host keys, time limits, ssh_config), how many hosts at once,
    over how many controller processes (None: automatic)."""

    ssh: SshOptions = field(default_factory=SshOptions)
    forks: int = DEFAULT_FORKS
    workers: int | None = None


class ProbeFailed(ProvisionError):
    """Some hosts could not be probed (the others' facts were saved); the message names each
    (exit 1: not bad input)."""

    code = 1


def plan_facts(
    names: list[str], inventory: Inventory | Path | None, facts_dir: Path, probe: ProbeSettings | None
) -> list[HostFacts]:
    """Facts for ``names``, in order: read from ``facts_dir``, or (``probe`` given) probed now,
    reached as ``inventory`` (read already, or its path) says.

    Probed facts are saved to ``facts_dir`` for every host that answered, even when others
    failed; then :class:`ProbeFailed` names each failed host with its error kind and message.
    """
    if probe is None:
        path = inventory.path if isinstance(inventory, Inventory) else inventory
        return [load_host(facts_dir, name, path) for name in names]
    inv = inventory if isinstance(inventory, Inventory) else open_inventory(inventory)
    results = probe_hosts(inv.resolve(names), probe.ssh, probe.forks, workers=probe.workers)
    problems = save_hosts(facts_dir, [(r.facts, r.captures) for r in results if r.facts is not None])
    if problems:
        raise ProbeFailed("facts not saved for " + "; ".join(f"{host} ({why})" for host, why in problems.items()))
    failed = [f"{r.host} ({r.error_kind}: {r.error})" for r in results if not r.ok]
    if failed:
        raise ProbeFailed("probe failed for " + "; ".join(failed))
    return [r.facts for r in results]
