"""DDL dimensions ``XxYxZ``: X learners (GPUs) per host, Y hosts per rack, Z racks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from provision.errors import PlanError
from provision.inventory.model import Rack
from provision.text import shown_value

_DIMS = re.compile(r"^(\d+)x(\d+)x(\d+)\Z")


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
        raise PlanError(
            f"dims {shown_value(text)}: expected XxYxZ with three whole numbers, e.g. 4x2x1 (use 1 to fill a dimension)"
        )
    x, y, z = (int(group) for group in match.groups())
    if 0 in (x, y, z):
        raise PlanError(f"dims {shown_value(text)}: every dimension must be at least 1")
    return Dims(x, y, z)


def _racks_text(racks: Sequence[Rack]) -> str:
    return "; ".join(f"{rack.name}: {', '.join(rack.hosts)}" for rack in racks)


def _fitting_shape(dims: Dims, racks: Sequence[Rack]) -> str:
    """What to do instead: the shape the racks have, or how to choose hosts when they differ."""
    sizes = {len(rack.hosts) for rack in racks}
    if len(sizes) == 1:
        return (
            f"the inventory's racks are {dims.x}x{sizes.pop()}x{len(racks)}, or choose Y hosts from each of Z racks with --hosts"
        )
    return (
        f"its racks hold {'/'.join(str(len(rack.hosts)) for rack in racks)} hosts: "
        "choose Y hosts from each of Z racks with --hosts, rack by rack"
    )


def rack_names(dims: Dims, hosts: Sequence[str], racks: Sequence[Rack]) -> tuple[str, ...]:
    """The inventory rack of each rank-file rack z (hosts come rack by rack, Y to a rack), or ``()``
    when the hosts are in no inventory rack. Raises :class:`PlanError`, naming the racks, when the
    shape does not follow the inventory: a rank-file rack holding hosts of two inventory racks, an
    inventory rack split over two rank-file racks, or some hosts in racks and others in none."""
    rack_of = {name: rack.name for rack in racks for name in rack.hosts}
    inside = [name for name in hosts if name in rack_of]
    if not inside or len(hosts) != dims.hosts:
        return ()
    involved = [rack for rack in racks if any(rack_of.get(name) == rack.name for name in hosts)]
    listing = _racks_text(involved)
    outside = [name for name in hosts if name not in rack_of]
    if outside:
        raise PlanError(
            f"dims {dims}: {', '.join(outside)} in no rack of the inventory while the other hosts are ({listing}): "
            "add them to a rack, or choose hosts of racks only"
        )
    names: list[str] = []
    for z in range(dims.z):
        block = list(hosts[z * dims.y : (z + 1) * dims.y])
        in_racks = list(dict.fromkeys(rack_of[name] for name in block))
        if len(in_racks) > 1:
            raise PlanError(
                f"dims {dims} put {', '.join(block)} in one rack (rack {z + 1} of {dims.z}, Y = {dims.y} hosts each), "
                f"but the inventory has them in racks {' and '.join(in_racks)} ({listing}); {_fitting_shape(dims, involved)}"
            )
        if in_racks[0] in names:
            raise PlanError(
                f"dims {dims} split rack {in_racks[0]} of the inventory over racks {names.index(in_racks[0]) + 1} and {z + 1} "
                f"of the rank file (Y = {dims.y} hosts each; {listing}); {_fitting_shape(dims, involved)}"
            )
        names.append(in_racks[0])
    return tuple(names)
