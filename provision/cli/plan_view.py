"""How `provision topology` shows a plan: the plan's warnings and notes on stderr, the tree of
racks, hosts, sockets and ranks (each rank's cores, GPU and NIC) on stdout, and the SVG picture
written where --svg says."""

from __future__ import annotations

from pathlib import Path

from provision.cli.output import note, stdout, warn, write_or_print


def show_topology(shown, svg_out: Path | None) -> None:
    """Print ``shown`` (a :class:`provision.plans.service.Topology`); write its picture to ``svg_out``."""
    from provision.plans.picture import rich_tree, svg

    for warning in shown.plan.warnings:
        warn(str(warning))
    for line in [*shown.notes, *shown.nics.notes]:
        note(line)
    stdout().print(rich_tree(shown.plan, shown.nics))
    if svg_out is not None:
        write_or_print(svg(shown.plan), svg_out, "picture")
