"""Fill a shape's Y·Z hosts from the healthy ones, rack by rack as the inventory orders them (pure).

`launch --pick-healthy` gives more candidates than the shape needs and the hosts doctor found at
fault (with why); this picks, for each of the Z rank-file racks, Y healthy hosts of one inventory
rack (a rank-file rack never spans two inventory racks, nor an inventory rack two rank-file
racks: :func:`provision.plans.dims.rack_names`), the first racks with enough healthy hosts first,
each rack's hosts in inventory order. Candidates in no rack are taken in their order, Y·Z of them.
Every candidate not taken is named with why: at fault (doctor's reason), in a rack too short of
healthy hosts, or not needed.

>>> from provision.plans.dims import Dims
>>> from provision.inventory.model import Rack
>>> racks = [Rack("r1", ("a1", "a2", "a3")), Rack("r2", ("b1", "b2"))]
>>> pick = fill_shape(Dims(4, 2, 2), ["a1", "a2", "a3", "b1", "b2"], racks, {"a2": "perf: bad node"})
>>> pick.hosts, pick.left_out
(('a1', 'a3', 'b1', 'b2'), (('a2', 'perf: bad node'),))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from provision.errors import PlanError
from provision.inventory.model import Rack
from provision.plans.dims import Dims


@dataclass(frozen=True)
class Selection:
    """The hosts chosen (rank-file order) and each candidate left out with why."""

    hosts: tuple[str, ...]
    left_out: tuple[tuple[str, str], ...]
    notes: tuple[str, ...] = ()  # what the choice could not avoid (a bad link it crosses)


def _reason_list(unhealthy: dict[str, str], names: Sequence[str]) -> str:
    at_fault = [f"{name} ({unhealthy[name]})" for name in names if name in unhealthy]
    return "; ".join(at_fault[:6]) + (f"; and {len(at_fault) - 6} more" if len(at_fault) > 6 else "")


def fill_shape(dims: Dims, candidates: Sequence[str], racks: Sequence[Rack], unhealthy: dict[str, str]) -> Selection:
    """The Y·Z hosts for ``dims`` among ``candidates`` without those in ``unhealthy`` (host -> why);
    :class:`PlanError`, one line naming what is missing and the hosts at fault, when they do not fill it."""
    rack_of = {name: rack.name for rack in racks for name in rack.hosts}
    healthy = [name for name in candidates if name not in unhealthy]
    chosen: list[str] = []
    short: dict[str, str] = {}  # host -> why its rack was not used
    if any(name in rack_of for name in candidates):
        for rack in racks:
            members = [name for name in rack.hosts if name in candidates]
            fit = [name for name in members if name not in unhealthy]
            if not members:
                continue
            if len(chosen) == dims.hosts:
                short.update(dict.fromkeys(fit, "not needed: the shape is full"))
            elif len(fit) < dims.y:
                short.update(dict.fromkeys(fit, f"rack {rack.name} has {len(fit)} healthy hosts, fewer than Y = {dims.y}"))
            else:
                chosen += fit[: dims.y]
                short.update(dict.fromkeys(fit[dims.y :], f"not needed: rack {rack.name} gives Y = {dims.y}"))
        outside = [name for name in healthy if name not in rack_of]
        short.update(dict.fromkeys(outside, "in no rack of the inventory (the others are)"))
        if len(chosen) < dims.hosts:
            usable = len(chosen) // dims.y
            raise PlanError(
                f"dims {dims} need {dims.z} racks of {dims.y} healthy hosts; only {usable} of the inventory's racks have them"
                + (f"; at fault: {_reason_list(unhealthy, candidates)}" if unhealthy else "")
            )
    else:
        if len(healthy) < dims.hosts:
            raise PlanError(
                f"dims {dims} need Y·Z = {dims.hosts} healthy hosts; {len(healthy)} of {len(candidates)} are"
                + (f"; at fault: {_reason_list(unhealthy, candidates)}" if unhealthy else "")
            )
        chosen = healthy[: dims.hosts]
        short.update(dict.fromkeys(healthy[dims.hosts :], f"not needed: the shape takes Y·Z = {dims.hosts}"))
    left = [(name, unhealthy.get(name) or short.get(name, "")) for name in candidates if name not in chosen]
    return Selection(tuple(chosen), tuple(left))
