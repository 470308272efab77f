"""Built-in defaults of the settings a user can change (command line > environment > config file >
these), at the bottom layer so that the command line can show them in its help without importing
SSH, Jinja2 or YAML (start-up, issue 28). The modules that use them import them from here."""

from __future__ import annotations

from pathlib import Path

FORKS = 64  # hosts at once: enough to keep a 2-core control node busy; pdsh's default fanout is 32
FACTS_DIR = Path("inventory/facts")  # <host>.json + raw captures
CONNECT_TIMEOUT = 10.0  # seconds for each SSH connection, ProxyJump hops included
COMMAND_TIMEOUT = 300.0  # seconds one remote command (one round trip) may run
PAIRWISE_FANOUT = 8  # ssh clients each node runs at once in doctor's pairwise step
PERF_PORT = 47201  # doctor --perf: the high TCP port iperf3's one-off servers listen on, the same on every node


def facts_folder(inventory: Path | None) -> Path:
    """The facts folder when none is named: ``facts/`` beside the inventory file (so
    ``inventory/facts`` for the default ``inventory/hosts.yml``), whatever the current directory;
    :data:`FACTS_DIR` without an inventory. One rule for every command that reads or writes facts
    (probe, rankfile, launch, topology, slurm-gres, setup-cluster's Slurm role); a folder named on
    the command line is taken as given (relative to where the command runs). Here, at the bottom
    layer, so that a command finds its folder without importing the fact parsers.

    >>> str(facts_folder(Path("/srv/cluster/hosts.yml"))), str(facts_folder(None))
    ('/srv/cluster/facts', 'inventory/facts')
    """
    return Path(inventory).parent / "facts" if inventory is not None else FACTS_DIR
