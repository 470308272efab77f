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
                        label.append(f" ({gpu.name}, {gpu.bus_id})", style="dim")
                    nic = nic_of.get(slot.rank)
                    if nic is not None and nic.device is not None:
                        label.append(f" · NIC {nic.hca()} ({nic.distance})")
                    socket_node.add(label)
    return tree


def svg(plan: RankPlan) -> str:
    """A standalone SVG of the plan (one row per host, one block per socket, a square per core)."""
    cells = core_cells(plan)
    hosts = sorted(plan.hosts, key=lambda h: h.index)
    cell, gap, label_width = 14, 2, 150
    rows = []
    y = 40
    width = 0
    for host_plan in hosts:
        facts = plan.facts[host_plan.index]
        x = label_width
        sockets = []
        for socket_index, socket in enumerate(cells[host_plan.host]):
            squares = []
            for position, core in enumerate(socket):
                fill = _PALETTE[core.slot.learner % len(_PALETTE)] if core.slot else "#eeeeee"
                title = f"socket {socket_index} core {core.index}" + (
                    f": rank {core.slot.rank}, {_gpu_text(facts, core.slot)}" if core.slot else ": unused"
                )
                squares.append({"x": x + position * (cell + gap), "y": y, "fill": fill, "title": title})
            sockets.append({"x": x, "label": f"socket {socket_index}", "squares": squares})
            x += len(socket) * (cell + gap) + 20
        width = max(width, x)
        ranks = ", ".join(f"{s.rank}@{s.slot_text()}" for s in sorted(host_plan.slots, key=lambda s: s.learner))
        rows.append(
            {
                "y": y,
                "host": host_plan.host,
                "rack": plan.rack_label(host_plan.rack),
                "shape": facts.cpu.shape(),
                "sockets": sockets,
                "ranks": ranks,
            }
        )
        y += cell + 34
    gpus_present = min((len(facts.gpus) for facts in plan.facts), default=0)
    legend = [
        {
            "x": label_width + 430 + learner * 58,
            "fill": _PALETTE[learner % len(_PALETTE)],
            "label": f"GPU {learner}" if learner < gpus_present else f"learner {learner}",
        }
        for learner in range(plan.dims.x)
    ]
    width = max(width, label_width + 430 + 58 * plan.dims.x)
    return render("topology.svg.j2", plan=plan, rows=rows, legend=legend, width=width + 20, height=y + 10, cell=cell)
