"""DDL dimensions ``XxYxZ``: X learners (GPUs) per host, Y hosts per rack, Z racks."""

from __future__ import annotations

import re
from dataclasses import dataclass

from provision.errors import PlanError

_DIMS = re.compile(r"^(\d+)x(\d+)x(\d+)$")


@dataclass(frozen=True)
class Dims:
    """``XxYxZ`` as numbers."""

    x: int  # learners per host
    y: int  # hosts per rack
    z: int  # racks

    @property
    def hosts(self) -> int:
        """Hosts in the job: Y·Z."""
        return self.y * self.z

    @property
    def learners(self) -> int:
        """MPI ranks in the job: X·Y·Z."""
        return self.x * self.y * self.z

    def __str__(self) -> str:
        return f"{self.x}x{self.y}x{self.z}"


def parse_dims(text: str) -> Dims:
    """``"4x2x3"`` -> Dims(4, 2, 3). All three are required (use 1 to fill), each at least 1."""
    match = _DIMS.match(text.strip().lower())
    if not match:
        raise PlanError(f"dims {text!r}: expected XxYxZ with three whole numbers, e.g. 4x2x1 (use 1 to fill a dimension)")
    x, y, z = (int(group) for group in match.groups())
    if 0 in (x, y, z):
        raise PlanError(f"dims {text!r}: every dimension must be at least 1")
    return Dims(x, y, z)
