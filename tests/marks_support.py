"""Support for the unit tests of Slurm marks: a PATH with the TEST STAND-INs of sinfo, scontrol and
sudo (tests/standins/slurm/), whose node states and recorded calls live in one folder.

Test infrastructure only: the real sinfo and scontrol are used in tests/test_slurm_drain_cluster.py.
"""

from __future__ import annotations

import os
from pathlib import Path

STANDINS = Path(__file__).resolve().parent / "standins" / "slurm"


def slurm_standin(folder: Path, nodes: str) -> dict[str, str]:
    """The environment for a script that meets the stand-ins: ``nodes`` as ``sinfo -h -N -o '%N %t
    %E'`` prints them; their calls are then read with :func:`scontrol_calls`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nodes").write_text(nodes)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "SLURMD"))}
    return env | {"PATH": f"{STANDINS}:{env.get('PATH', '/usr/bin:/bin')}", "SLURM_STANDIN": str(folder)}


def scontrol_calls(folder: Path) -> list[str]:
    """What scontrol was asked, one call a line (``update | NodeName=sn1 | State=DRAIN | Reason=...``)."""
    calls = folder / "calls"
    return calls.read_text().splitlines() if calls.exists() else []
