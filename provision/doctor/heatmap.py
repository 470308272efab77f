"""A heat map of doctor --perf's pairwise figures as inline SVG (pure: figures in, markup out).

Row ``i``, column ``j``: what node ``i`` sent to node ``j`` (both directions of a pair, one cell
each). Each figure is coloured by its ratio to the median of its kind, in eight steps of a
sequential scale (viridis: dark to light, readable in grey print and by colour-blind readers;
the dark end is slow for bandwidth, high for latency).
What colour alone must not carry has a pattern or a mark as well: a slow cell (below the check's
threshold) is hatched, a failed test is crossed, a pair not tested is dotted; a bad node's row
and column are outlined, a link at fault is ringed (solid: bad link, dashed: slow link, dotted:
test failed). Every mark has its words in a ``<title>`` and an ``aria-label``, and the page
lists them as text as well.

Nodes come in rack groups (a small gap between racks) as the inventory orders them. Cells are
drawn one path per colour, run by run along each row, so 256 nodes (65,280 cells) stay a few
hundred kilobytes; up to :data:`TITLED` nodes each cell also has its own ``<title>`` (its figure
when the pointer rests on it).

>>> grid = Grid(("a", "b"), ("", ""))
>>> picture = heatmap("t", "demo", grid, [[None, 9.0], [8.0, None]], bandwidth_scale(8.5), Marks({}, ()))
>>> picture.startswith("<svg") and "a → b: 9 Gbit/s" in picture
True
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

from provision.text import shown

# viridis sampled at eight even steps, dark to light: its lightness rises step by step (grey print
# keeps the order) and it avoids the red-green axis colour-blind readers lose
PALETTE = ("#440154", "#46337e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d", "#9fda3a", "#fde725")
BANDWIDTH_EDGES = (0.125, 0.25, 0.5, 0.75, 0.9, 1.1, 1.25)  # ratio to the median: low is dark
LATENCY_EDGES = (0.8, 0.9, 1.1, 1.25, 1.5, 2.0, 4.0)  # ratio to the median: high is dark
TITLED = 32  # up to this many nodes every cell has its own <title> (64 nodes: 4,032 cells a map, 0.5 MB more each)
SELF, NONE, FAILED = "self", "none", "failed"

# Patterns shared by every heat map and legend swatch of a page (ids are the page's).
DEFS = (
    '<svg width="0" height="0" style="position:absolute" aria-hidden="true" focusable="false"><defs>'
    '<pattern id="pat-slow" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
    '<rect width="1.6" height="4" fill="#ffffff"/></pattern>'
    '<pattern id="pat-failed" width="6" height="6" patternUnits="userSpaceOnUse">'
    '<rect width="6" height="6" fill="#d9d9d9"/><path d="M0 0L6 6M6 0L0 6" stroke="#000" stroke-width="1.2"/></pattern>'
    '<pattern id="pat-none" width="4" height="4" patternUnits="userSpaceOnUse">'
    '<rect width="4" height="4" fill="#f2f2f2"/><circle cx="2" cy="2" r="0.7" fill="#8c8c8c"/></pattern>'
    "</defs></svg>"
)
RING = {"bad link": "", "slow link": "4 2", "test failed": "1.5 1.5"}  # stroke-dasharray of each kind of link at fault


def _e(text: object) -> str:
    """Text for SVG/HTML: control characters made visible (:func:`provision.text.shown`), then escaped."""
    return html.escape(shown(str(text), newlines=False), quote=True)


def figure(value: float) -> str:
    """``9.41``, ``0.0931``, ``1.2e+03``: three significant figures."""
    return f"{value:.3g}"


@dataclass(frozen=True)
class Scale:
    """Colour steps by ratio to ``median``: step ``i`` holds ratios below ``edges[i]`` (the last, the rest)."""

    median: float
    edges: tuple[float, ...]
    colours: tuple[str, ...]
    unit: str

    def step(self, value: float) -> int:
        ratio = value / self.median if self.median > 0 else 1.0
        return next((i for i, edge in enumerate(self.edges) if ratio < edge), len(self.edges))

    def ranges(self) -> list[tuple[str, str]]:
        """(colour, words) per step: ``4.7-7.06 Gbit/s (50-75% of the median)``."""
        bounds = [0.0, *self.edges]
        steps = []
        for i, colour in enumerate(self.colours):
            low = bounds[i]
            if i == len(self.edges):
                words = f"{figure(low * self.median)} {self.unit} or more ({low:.0%} of the median or more)"
            elif i == 0:
                words = f"below {figure(self.edges[0] * self.median)} {self.unit} (below {self.edges[0]:.0%} of the median)"
            else:
                high = self.edges[i]
                words = (
                    f"{figure(low * self.median)}-{figure(high * self.median)} {self.unit} ({low:.0%}-{high:.0%} of the median)"
                )
            steps.append((colour, words))
        return steps


def bandwidth_scale(median: float, unit: str = "Gbit/s") -> Scale:
    return Scale(median, BANDWIDTH_EDGES, PALETTE, unit)


def latency_scale(median: float, unit: str = "µs") -> Scale:
    return Scale(median, LATENCY_EDGES, tuple(reversed(PALETTE)), unit)


@dataclass(frozen=True)
class Grid:
    """The rows and columns: the nodes in rack order and the rack of each ("": in none)."""

    nodes: tuple[str, ...]
    racks: tuple[str, ...]


@dataclass(frozen=True)
class Marks:
    """What the check holds at fault: bad nodes (host -> why) and links ``(a, b, verdict, why)``."""

    bad_nodes: dict[str, str]
    links: tuple[tuple[str, str, str, str], ...]


@dataclass(frozen=True)
class _Layout:
    cell: int
    pos: tuple[int, ...]  # each node's offset from the matrix's corner
    size: int  # the matrix's width and height
    left: int  # the matrix's x
    top: int  # the matrix's y
    label_chars: int
    step: int  # every step-th node is labelled (bad nodes always)


def _layout(grid: Grid) -> _Layout:
    count = len(grid.nodes)
    cell = max(4, min(36, 760 // max(count, 1)))
    gap = 4 if len(set(grid.racks)) > 1 else 0
    pos, group, previous = [], 0, None
    for index, rack in enumerate(grid.racks):
        if index and rack != previous:
            group += 1
        previous = rack
        pos.append(index * cell + group * gap)
    size = (pos[-1] + cell) if pos else 0
    label_chars = min(20, max([len(node) for node in grid.nodes] + [4]))
    rack_band = 16 if gap else 0
    label = label_chars * 6 + 16  # text, then a mark's triangle
    return _Layout(cell, tuple(pos), size, rack_band + label, rack_band + label, label_chars, max(1, math.ceil(11 / cell)))


def _runs(count: int, layout: _Layout, classify) -> dict:
    """class -> path data: each row's cells of one class, run by run (a rack gap ends a run), as
    horizontal strokes one cell wide (drawn with ``stroke-width`` = the cell): ``M x y h w`` for a
    row's first run, then ``m gap 0 h w`` from the end of the one before, so a noisy row costs a few
    bytes a cell."""
    paths: dict = {}
    cell = layout.cell
    for i in range(count):
        y = layout.top + layout.pos[i] + cell / 2
        ends: dict = {}  # class -> where its last run in this row ended
        j = 0
        while j < count:
            kind = classify(i, j)
            end = j
            while end + 1 < count and classify(i, end + 1) == kind and layout.pos[end + 1] - layout.pos[end] == cell:
                end += 1
            if kind is not None:
                x = layout.left + layout.pos[j]
                width = layout.pos[end] + cell - layout.pos[j]
                if kind in ends:
                    paths[kind].append(f"m{x - ends[kind]} 0h{width}")
                else:
                    paths.setdefault(kind, []).append(f"M{x} {y:g}h{width}")
                ends[kind] = x + width
            j = end + 1
    return {kind: "".join(parts) for kind, parts in paths.items()}


def _labels(grid: Grid, layout: _Layout, bad: set[str]) -> list[str]:
    """Node names beside the rows and over the columns (every ``step``-th; bad nodes always, bold),
    rack names over each rack's group."""
    count, cell = len(grid.nodes), layout.cell
    shown_at = set(range(0, count, layout.step))
    for i, node in enumerate(grid.nodes):
        if node in bad:  # its neighbours' labels make room for it
            near = range(max(0, i - layout.step + 1), min(count, i + layout.step))
            shown_at = (shown_at - {k for k in near if grid.nodes[k] not in bad}) | {i}
    size = 10 if cell >= 10 else 9
    parts = [f'<g font-size="{size}" fill="#222">']
    for i in sorted(shown_at):
        node = grid.nodes[i]
        name = node if len(node) <= layout.label_chars else node[: layout.label_chars - 1] + "…"
        weight = ' font-weight="700"' if node in bad else ""
        middle = layout.pos[i] + cell / 2
        parts.append(
            f'<text x="{layout.left - 12}" y="{layout.top + middle + 3:g}" text-anchor="end"{weight}>{_e(name)}</text>'
            f'<text transform="translate({layout.left + middle + 3:g},{layout.top - 12}) rotate(-90)"{weight}>{_e(name)}</text>'
        )
    parts.append("</g>")
    if len(set(grid.racks)) > 1:
        parts.append('<g font-size="10" fill="#555" font-style="italic">')
        start = 0
        for i in range(1, count + 1):
            if i == count or grid.racks[i] != grid.racks[start]:
                span = layout.pos[i - 1] + cell - layout.pos[start]
                rack = grid.racks[start] or "no rack"
                fits = max(1, int(span / 6))
                words = rack if len(rack) <= fits else rack[: max(1, fits - 1)] + "…"
                parts.append(f'<text x="{layout.left + layout.pos[start]}" y="11"><title>{_e(rack)}</title>{_e(words)}</text>')
                if span >= 12:
                    parts.append(
                        f'<text transform="translate(4,{layout.top + layout.pos[start]}) rotate(90)">'
                        f"<title>{_e(rack)}</title>{_e(words)}</text>"
                    )
                start = i
        parts.append("</g>")
    return parts


def _ring(x: float, y: float, size: float, dash: str) -> str:
    """A ring around one cell: white under black, so it shows on dark and light cells alike."""
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    box = f'x="{x - 2:g}" y="{y - 2:g}" width="{size + 4:g}" height="{size + 4:g}" fill="none"'
    return f'<rect {box} stroke="#fff" stroke-width="4"/><rect {box} stroke="#000" stroke-width="2"{dashed}/>'


def _marks(grid: Grid, layout: _Layout, marks: Marks) -> list[str]:
    """Bad nodes' rows and columns outlined, with a triangle at their labels; links at fault ringed (both cells)."""
    index = {node: i for i, node in enumerate(grid.nodes)}
    cell, left, top, size = layout.cell, layout.left, layout.top, layout.size
    parts = []
    for host, why in marks.bad_nodes.items():
        if host not in index:
            continue
        at = layout.pos[index[host]]
        words = _e(f"bad node {host}: {why}")
        frame = (
            f'<rect x="{left - 2}" y="{top + at - 2}" width="{size + 4}" height="{cell + 4}"/>'
            f'<rect x="{left + at - 2}" y="{top - 2}" width="{cell + 4}" height="{size + 4}"/>'
        )
        parts.append(
            f'<g class="mark bad-node" data-host="{_e(host)}" role="img" aria-label="{words}"><title>{words}</title>'
            f'<g fill="none" stroke="#fff" stroke-width="4">{frame}</g>'
            f'<g fill="none" stroke="#000" stroke-width="2" stroke-dasharray="6 3">{frame}</g>'
            f'<path d="M{left - 10} {top + at + cell / 2 - 4:g}l7 4l-7 4z'
            f'M{left + at + cell / 2 - 4:g} {top - 10}l4 7l4 -7z" fill="#000"/></g>'
        )
    for a, b, verdict, why in marks.links:
        if a not in index or b not in index:
            continue
        words = _e(f"{verdict} {a}-{b}: {why}")
        rings = "".join(
            _ring(left + layout.pos[index[col]], top + layout.pos[index[row]], cell, RING.get(verdict, ""))
            for row, col in ((a, b), (b, a))
        )
        kind = verdict.replace(" ", "-")
        parts.append(
            f'<g class="mark {_e(kind)}" data-a="{_e(a)}" data-b="{_e(b)}" role="img" aria-label="{words}">'
            f"<title>{words}</title>{rings}</g>"
        )
    return parts


def heatmap(
    ident: str,
    caption: str,
    grid: Grid,
    values: list[list[float | None]],
    scale: Scale,
    marks: Marks,
    *,
    slow_below: float | None = None,
    failed: frozenset[tuple[int, int]] = frozenset(),
    arrow: str = "→",
) -> str:
    """The SVG: ``values[i][j]`` (None: not measured; ``failed`` holds the (i, j) of failed tests),
    coloured by ``scale``, cells below ``slow_below`` hatched, ``marks`` drawn over it."""
    count = len(grid.nodes)
    layout = _layout(grid)
    width, height = layout.left + layout.size + 12, layout.top + layout.size + 12

    def colour(i: int, j: int):
        if i == j:
            return SELF
        value = values[i][j]
        if value is None:
            return FAILED if (i, j) in failed else NONE
        return scale.step(value)

    def hatched(i: int, j: int):
        value = values[i][j]
        return True if i != j and value is not None and slow_below is not None and value < slow_below else None

    runs = _runs(count, layout, colour)
    slow = _runs(count, layout, hatched)
    bad = {host for host in marks.bad_nodes if host in grid.nodes}
    frame = layout.size + 2
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" id="{_e(ident)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="{_e(ident)}-t" '
        'font-family="DejaVu Sans, Arial, sans-serif">',
        f'<title id="{_e(ident)}-t">{_e(caption)}</title>',
        f'<rect x="{layout.left - 1}" y="{layout.top - 1}" width="{frame}" height="{frame}" fill="#fff" stroke="#bbb"/>',
        f'<g class="cells" shape-rendering="crispEdges" fill="none" stroke-width="{layout.cell}">',
    ]
    for kind, data in sorted(runs.items(), key=lambda item: str(item[0])):
        fill = {SELF: "#ffffff", NONE: "url(#pat-none)", FAILED: "url(#pat-failed)"}.get(kind) or scale.colours[kind]
        parts.append(f'<path class="c-{kind}" stroke="{fill}" d="{data}"/>')
    if slow.get(True):
        parts.append(f'<path class="slow" stroke="url(#pat-slow)" d="{slow[True]}"/>')
    parts.append("</g>")
    if count <= TITLED:
        parts.append('<g class="values" fill="transparent">')
        for i, row in enumerate(grid.nodes):
            for j, col in enumerate(grid.nodes):
                if i == j:
                    continue
                value = values[i][j]
                if value is None:
                    words = f"{row} {arrow} {col}: {'test failed' if (i, j) in failed else 'not tested'}"
                else:
                    share = f" ({value / scale.median:.0%} of the median)" if scale.median > 0 else ""
                    words = f"{row} {arrow} {col}: {figure(value)} {scale.unit}{share}"
                x, y = layout.left + layout.pos[j], layout.top + layout.pos[i]
                parts.append(
                    f'<rect x="{x}" y="{y}" width="{layout.cell}" height="{layout.cell}"><title>{_e(words)}</title></rect>'
                )
        parts.append("</g>")
    parts += _labels(grid, layout, bad)
    parts += _marks(grid, layout, marks)
    parts.append("</svg>")
    return "".join(parts)


def swatch(fill: str, *, pattern: str = "", ring: str | None = None, frame: bool = False) -> str:
    """A legend's 16 px sample: a colour, a pattern over it, a ring or a dashed outline."""
    parts = [f'<svg width="18" height="18" viewBox="-1 -1 18 18" aria-hidden="true"><rect width="16" height="16" fill="{fill}"/>']
    if pattern:
        parts.append(f'<rect width="16" height="16" fill="url(#{pattern})"/>')
    if ring is not None:
        dashed = f' stroke-dasharray="{ring}"' if ring else ""
        parts.append(f'<rect x="2" y="2" width="12" height="12" fill="none" stroke="#000" stroke-width="2"{dashed}/>')
    if frame:
        parts.append(
            '<rect x="1" y="4" width="14" height="8" fill="none" stroke="#000" stroke-width="2" stroke-dasharray="6 3"/>'
        )
    parts.append("</svg>")
    return "".join(parts)
