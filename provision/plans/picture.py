"""A picture of a rank plan: racks -> hosts -> sockets -> cores, each core labelled with the rank
bound to it and the GPU that rank drives. Terminal (rich Tree) and SVG (Jinja2 template)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.markup import escape
from rich.text import Text
from rich.tree import Tree

from provision.plans.nics import NicPlan
from provision.plans.rankfile import RankPlan, Slot
from provision.resources import render
from provision.text import shown

_PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]


@dataclass(frozen=True)
class CoreCell:
    """One core in the picture: socket-relative index and the slot bound to it (or None)."""

    index: int
    slot: Slot | None


def core_cells(plan: RankPlan) -> dict[str, list[list[CoreCell]]]:
    """{host: [socket][core] -> CoreCell}, from each host's facts and slots."""
    cells = {}
    for host_plan, facts in zip(sorted(plan.hosts, key=lambda h: h.index), plan.facts, strict=False):
        by_core = {(s.socket, core): s for s in host_plan.slots for core in range(s.first_core, s.last_core + 1)}
        cells[host_plan.host] = [
            [CoreCell(core.index, by_core.get((socket.index, core.index))) for core in socket.cores]
            for socket in facts.cpu.sockets
        ]
    return cells


def _gpu_text(facts, slot: Slot) -> str:
    """``GPU 1``, or ``no GPU`` where the host has no GPU of that index (--allow-no-gpu)."""
    return f"GPU {slot.learner}" if any(gpu.index == slot.learner for gpu in facts.gpus) else "no GPU"


def rich_tree(plan: RankPlan, nics: NicPlan | None = None) -> Tree:
    """The terminal picture (with ``nics``: each rank's NIC port and its distance, beside its GPU)."""
    nic_of = {r.rank: r for r in nics.ranks} if nics is not None else {}
    tree = Tree(
        f"[bold]{plan.dims}[/bold]: {plan.dims.learners} ranks on {plan.dims.hosts} hosts in {plan.dims.z} rack(s)",
        highlight=False,
    )
    cells = core_cells(plan)
    hosts = sorted(plan.hosts, key=lambda h: h.index)
    for rack in range(plan.dims.z):
        rack_node = tree.add(f"[bold]{escape(plan.rack_label(rack))}[/bold]")
        for host_plan in [h for h in hosts if h.rack == rack]:
            facts = plan.facts[host_plan.index]
            host_node = rack_node.add(f"[bold cyan]{host_plan.host}[/bold cyan] {facts.cpu.shape()} ({facts.cpu.source})")
            for socket_index, socket in enumerate(cells[host_plan.host]):
                line = Text(f"socket {socket_index} ")
                for cell in socket:
                    if cell.slot is None:
                        line.append("·", style="dim")
                    else:
                        colour = _PALETTE[cell.slot.learner % len(_PALETTE)]
                        line.append("■", style=colour)
                socket_node = host_node.add(line)
                for slot in sorted((s for s in host_plan.slots if s.socket == socket_index), key=lambda s: s.first_core):
                    gpu = next((g for g in facts.gpus if g.index == slot.learner), None)
                    label = Text("■ ", style=_PALETTE[slot.learner % len(_PALETTE)])
                    if gpu is None:  # --allow-no-gpu: learner x drives no GPU on this host
                        label.append(f"rank {slot.rank}: cores {slot.slot_text()} -> no GPU")
                    else:
                        label.append(f"rank {slot.rank}: cores {slot.slot_text()} -> GPU {slot.learner}")
                        # a Text is rendered as it is (the console's escaping sees only strings): node text escaped here
                        label.append(shown(f" ({gpu.name}, {gpu.bus_id})", newlines=False), style="dim")
                    nic = nic_of.get(slot.rank)
                    if nic is not None and nic.device is not None:
                        label.append(shown(f" · NIC {nic.hca()} ({nic.distance})", newlines=False))
                    socket_node.add(label)
    return tree


CHAR_WIDTH = 7  # px per character at font-size 11 (DejaVu Sans averages ~6.5): text never runs under the next box


def legend_rows(labels: list[tuple[str, str]], left: int, right: int, cell: int) -> list[dict]:
    """Legend entries ``(label, fill)`` laid out from ``left``, each box followed by its label and
    the next entry placed after the label's width, wrapping before ``right``: ``[{x, row, fill, label}]``."""
    entries, x, row = [], left, 0
    for label, fill in labels:
        span = cell + 4 + len(label) * CHAR_WIDTH + 14
        if x > left and x + span > right:
            x, row = left, row + 1
        entries.append({"x": x, "row": row, "fill": fill, "label": label})
        x += span
    return entries


def svg(plan: RankPlan) -> str:
    """A standalone SVG of the plan: the title, a legend under it (one colour per learner, the GPU
    it drives), then one row per host, one block per socket, a square per core. The picture is
    as wide as its widest row (the legend wraps to it), never padded to a fixed size."""
    cells = core_cells(plan)
    hosts = sorted(plan.hosts, key=lambda h: h.index)
    cell, gap = 14, 2
    label_width = 20 + CHAR_WIDTH * max([len(h.host) for h in hosts] + [len(plan.rack_label(h.rack)) + 12 for h in hosts] + [12])
    title = f"{plan.dims}: {plan.dims.learners} ranks on {plan.dims.hosts} hosts in {plan.dims.z} rack(s)"
    content = max(
        [label_width + sum(len(socket) * (cell + gap) + 20 for socket in cells[h.host]) for h in hosts] + [10 + len(title) * 9]
    )
    gpus_present = min((len(facts.gpus) for facts in plan.facts), default=0)
    legend = legend_rows(
        [
            (f"GPU {learner}" if learner < gpus_present else f"learner {learner}", _PALETTE[learner % len(_PALETTE)])
            for learner in range(plan.dims.x)
        ],
        10,
        max(content, 400),
        cell,
    )
    for entry in legend:
        entry["y"] = 30 + entry["row"] * (cell + 6)
    rows = []
    y = 30 + (max((e["row"] for e in legend), default=0) + 1) * (cell + 6) + 22
    width = max(content, max((e["x"] + cell + 4 + len(e["label"]) * CHAR_WIDTH for e in legend), default=0))
    for host_plan in hosts:
        facts = plan.facts[host_plan.index]
        x = label_width
        sockets = []
        for socket_index, socket in enumerate(cells[host_plan.host]):
            squares = []
            for position, core in enumerate(socket):
                fill = _PALETTE[core.slot.learner % len(_PALETTE)] if core.slot else "#eeeeee"
                title_text = f"socket {socket_index} core {core.index}" + (
                    f": rank {core.slot.rank}, {_gpu_text(facts, core.slot)}" if core.slot else ": unused"
                )
                squares.append({"x": x + position * (cell + gap), "y": y, "fill": fill, "title": title_text})
            sockets.append({"x": x, "label": f"socket {socket_index}", "squares": squares})
            x += len(socket) * (cell + gap) + 20
        ranks = ", ".join(f"{s.rank}@{s.slot_text()}" for s in sorted(host_plan.slots, key=lambda s: s.learner))
        width = max(width, label_width + len("ranks: " + ranks) * CHAR_WIDTH)
        rows.append(
            {
                "y": y,
                "host": shown(host_plan.host, newlines=False),  # a saved JSON's name: its bytes seen, never obeyed
                "rack": shown(plan.rack_label(host_plan.rack), newlines=False),
                "shape": facts.cpu.shape(),
                "sockets": sockets,
                "ranks": ranks,
            }
        )
        y += cell + 34
    return render("topology.svg.j2", plan=plan, title=title, rows=rows, legend=legend, width=width + 10, height=y - 8, cell=cell)
