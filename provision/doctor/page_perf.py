"""The report page's bandwidth part: per kind of link (``tcp eth0``, ``rdma mlx5_0:1``) the heat
maps of bandwidth and latency, what they were judged by and covered, the marks as text, and the
tables of nodes and of links at fault (pure: ``doctor --json``'s ``perf`` in, the page's values out).

The document is read as a file anyone could have written: each field is taken only with the type
the schema gives it (a wrong one reads as absent) and a matrix that is not N x N is not drawn.
"""

from __future__ import annotations

import math
import statistics

from markupsafe import Markup

from provision.doctor.heatmap import Grid, Marks, bandwidth_scale, figure, heatmap, latency_scale, swatch

SYMBOL = {"pass": "✓", "warn": "!", "fail": "✗"}  # a check's status, said without colour
MOST_NODES = 1024  # a larger matrix is not drawn (its figures stay in the JSON)
MOST_ROWS = 200  # links listed in a kind's table of links at fault


def text(value: object, limit: int = 4000) -> str:
    """A string field as it is (cut at ``limit``), a number as its digits, anything else as ""."""
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    return ""


def number(value: object) -> float | None:
    """A finite number, else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def items(value: object) -> list:
    return value if isinstance(value, list) else []


def fields(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def rack_order(nodes: list[str], racks: list[tuple[str, list[str]]]) -> tuple[list[str], list[str]]:
    """``nodes`` grouped by rack in the inventory's rack order (nodes in no rack last, as given),
    and the rack of each ("" for none)."""
    present = set(nodes)
    ordered, rack_of = [], {}
    for name, hosts in racks:
        for host in hosts:
            if host in present and host not in rack_of:
                rack_of[host] = name
                ordered.append(host)
    ordered += [node for node in nodes if node not in rack_of]
    return ordered, [rack_of.get(node, "") for node in ordered]


def _legend(scale, marks: Marks, *, slow: bool, failed: bool, untested: bool) -> list[dict]:
    """The colour steps in figures, then only the patterns and marks this map has."""
    entries = [{"swatch": Markup(swatch(colour)), "words": words} for colour, words in scale.ranges()]
    verdicts = {verdict for _, _, verdict, _ in marks.links}
    present = [
        (slow, swatch(scale.colours[1], pattern="pat-slow"), "hatched: slow (below the threshold)"),
        (failed, swatch("#d9d9d9", pattern="pat-failed"), "crossed: the test failed"),
        (untested, swatch("#f2f2f2", pattern="pat-none"), "dotted: not tested (a budget or --rounds)"),
        (bool(marks.bad_nodes), swatch("#ffffff", frame=True), "dashed row and column, ▶ at the name: bad node"),
        ("bad link" in verdicts, swatch("#ffffff", ring=""), "ringed cell: bad link"),
        ("slow link" in verdicts, swatch("#ffffff", ring="4 2"), "dashed ring: slow link (not placed)"),
        ("test failed" in verdicts, swatch("#ffffff", ring="1.5 1.5"), "dotted ring: test failed"),
    ]
    return entries + [{"swatch": Markup(picture), "words": words} for shown, picture, words in present if shown]


def _coverage_words(coverage: dict) -> str:
    tested, total = number(coverage.get("pairs_tested")), number(coverage.get("pairs_total"))
    run, planned = number(coverage.get("rounds_run")), number(coverage.get("rounds_planned"))
    if None in (tested, total, run, planned):
        return "Coverage not recorded."
    words = f"Covered {tested:g} of {total:g} pairs in {run:g} of {planned:g} rounds"
    budget = number(coverage.get("budget_s"))
    if budget is None:
        return words + ", no time budget."
    stopped = "; the budget stopped the rounds there" if coverage.get("stopped_by_budget") is True else ""
    return words + f" within a budget of {budget:g} s{stopped}."


def _marks(kind: dict, check: dict) -> Marks:
    bad_nodes = {}
    for entry in items(kind.get("bad_nodes")):
        entry = fields(entry)
        if text(entry.get("host")):
            bad_nodes[text(entry.get("host"))] = text(entry.get("why"))
    links = []
    for entry in items(check.get("bad_links")) if check else []:
        entry = fields(entry)
        if text(entry.get("a")) and text(entry.get("b")):
            links.append((text(entry.get("a")), text(entry.get("b")), text(entry.get("verdict")), text(entry.get("why"))))
    if not check:  # no check of that name: the links' own verdicts
        named = {"bad link": "bad link", "slow link": "slow link", "failed": "test failed"}
        for link in items(kind.get("links")):
            link = fields(link)
            verdict = named.get(text(link.get("verdict")))
            if verdict:
                links.append((text(link.get("a")), text(link.get("b")), verdict, text(link.get("error"))))
    return Marks(bad_nodes, tuple(links))


def _latency(links: list[dict], index: dict[str, int], count: int, tcp: bool) -> list[list[float | None]] | None:
    """One latency figure per pair, in both of its cells (None: no test gave one)."""
    key = "rtt_us" if tcp else "latency_us"
    matrix: list[list[float | None]] = [[None] * count for _ in range(count)]
    found = False
    for link in links:
        a, b, value = text(link.get("a")), text(link.get("b")), number(link.get(key))
        if value is not None and a in index and b in index and a != b:
            matrix[index[a]][index[b]] = matrix[index[b]][index[a]] = value
            found = True
    return matrix if found else None


def _node_rows(nodes, racks, values, marks: Marks, latency) -> list[dict]:
    """Per node: what it sent and received (medians), its slowest figure and peer, its latency, its verdict."""
    ends = {}
    for a, b, verdict, _ in marks.links:
        ends.setdefault(a, []).append(f"{verdict} {a}-{b}")
        ends.setdefault(b, []).append(f"{verdict} {a}-{b}")
    rows = []
    for i, node in enumerate(nodes):
        sent = [v for j, v in enumerate(values[i]) if j != i and v is not None]
        received = [values[j][i] for j in range(len(nodes)) if j != i and values[j][i] is not None]
        pairs = [(v, nodes[j]) for j, v in enumerate(values[i]) if j != i and v is not None]
        pairs += [(values[j][i], nodes[j]) for j in range(len(nodes)) if j != i and values[j][i] is not None]
        slowest = min(pairs) if pairs else None
        lat = [v for j, v in enumerate(latency[i]) if j != i and v is not None] if latency else []
        if node in marks.bad_nodes:
            verdict = f"bad node {node}: {marks.bad_nodes[node]}"
        elif node in ends:
            verdict = "; ".join(f"end of {words}" for words in ends[node])
        else:
            verdict = "ok"
        rows.append(
            {
                "node": node,
                "rack": racks[i],
                "sent": figure(statistics.median(sent)) if sent else "",
                "received": figure(statistics.median(received)) if received else "",
                "slowest": f"{figure(slowest[0])} with {slowest[1]}" if slowest else "",
                "latency": figure(statistics.median(lat)) if lat else "",
                "verdict": verdict,
                "bad": verdict != "ok",
            }
        )
    return rows


def _link_rows(links: list[dict]) -> tuple[list[dict], int]:
    """The links that were not ok, slowest first (failed tests first of all), at most :data:`MOST_ROWS`."""
    at_fault = [link for link in links if text(link.get("verdict")) not in ("ok", "")]
    at_fault.sort(key=lambda link: (number(link.get("gbps")) is not None, number(link.get("gbps")) or 0.0))

    def digits(value: object) -> str:
        found = number(value)
        return figure(found) if found is not None else ""

    rows = [
        {
            "a": text(link.get("a")),
            "b": text(link.get("b")),
            "verdict": text(link.get("verdict")),
            "gbps": digits(link.get("gbps")),
            "forward": digits(link.get("forward_gbps")),
            "reverse": digits(link.get("reverse_gbps")),
            "latency": digits(link.get("rtt_us")) or digits(link.get("latency_us")),
            "error": text(link.get("error")),
        }
        for link in at_fault[:MOST_ROWS]
    ]
    return rows, max(0, len(at_fault) - MOST_ROWS)


def kind_view(number_of: int, kind: dict, check: dict, racks: list[tuple[str, list[str]]]) -> dict:
    """Everything the page shows of one kind of link (``number_of``: its place, for the SVGs' ids)."""
    name = text(kind.get("kind")) or "?"
    tcp = name.startswith("tcp")
    ident = f"kind{number_of}"
    status = text(check.get("status")) if check else ""
    view = {"id": ident, "kind": name, "status": status, "symbol": SYMBOL.get(status, "?"), "problem": ""}
    nodes = [text(node) for node in items(kind.get("nodes"))]
    matrix = items(kind.get("matrix_gbps"))
    if len(nodes) > MOST_NODES:
        return view | {"problem": f"{len(nodes)} nodes: more than {MOST_NODES}, not drawn (every figure is in the JSON)"}
    if not all(nodes) or len(set(nodes)) != len(nodes):
        return view | {"problem": "its nodes are not distinct names: not drawn"}
    if len(matrix) != len(nodes) or any(not isinstance(row, list) or len(row) != len(nodes) for row in matrix):
        return view | {"problem": f"matrix_gbps is not {len(nodes)} x {len(nodes)}: not drawn"}
    ordered, rack_names = rack_order(nodes, racks)
    where = {node: i for i, node in enumerate(nodes)}
    values = [[number(matrix[where[a]][where[b]]) if a != b else None for b in ordered] for a in ordered]
    index = {node: i for i, node in enumerate(ordered)}
    links = [fields(link) for link in items(kind.get("links"))]
    failed = set()
    for link in links:
        a, b = text(link.get("a")), text(link.get("b"))
        if text(link.get("verdict")) == "failed" and a in index and b in index:
            failed |= {(index[a], index[b]), (index[b], index[a])}
    marks = _marks(kind, check)
    grid = Grid(tuple(ordered), tuple(rack_names))
    measured = [v for row in values for v in row if v is not None]
    untested = any(
        values[i][j] is None and (i, j) not in failed for i in range(len(ordered)) for j in range(len(ordered)) if i != j
    )
    median = number(kind.get("median_gbps")) or (statistics.median(measured) if measured else 1.0)
    slow_below = number(kind.get("slow_below_gbps"))
    scale = bandwidth_scale(median)
    caption = f"{name}: Gbit/s each node (row) sent to each node (column), coloured by its share of the median"
    latency = _latency(links, index, len(ordered), tcp)
    view |= {
        "id": ident,
        "nodes": len(ordered),
        "racks": len({rack for rack in rack_names if rack}),
        "caption": caption,
        "judged": _judged_words(kind, median, slow_below, len(links)),
        "coverage": _coverage_words(fields(check.get("coverage")) if check else {}),
        "svg": Markup(heatmap(ident, caption, grid, values, scale, marks, slow_below=slow_below, failed=frozenset(failed))),
        "legend": _legend(
            scale,
            marks,
            slow=any(v < slow_below for v in measured) if slow_below else False,
            failed=bool(failed),
            untested=untested,
        ),
        "marks": [f"bad node {host}: {why}" for host, why in marks.bad_nodes.items()]
        + [f"{verdict} {a}-{b}: {why}" for a, b, verdict, why in marks.links],
        "node_rows": _node_rows(ordered, rack_names, values, marks, latency),
        "latency": None,
    }
    view["link_rows"], view["links_left"] = _link_rows(links)
    if latency is not None:
        view["latency"] = _latency_view(f"{ident}-latency", name, grid, latency, marks, failed)
    return view


def _judged_words(kind: dict, median: float, slow_below: float | None, tests: int) -> str:
    share, node_share = number(kind.get("slow_share")), number(kind.get("node_share"))
    words = f"Median {figure(median)} Gbit/s over {tests} tests (both directions of each pair)."
    if slow_below is not None:
        words += f" A link below {figure(slow_below)} Gbit/s"
        words += f" ({share:.0%} of the median)" if share is not None else ""
        words += " is slow (hatched)."
    if node_share is not None:
        words += f" A node slow with {node_share:.0%} of its peers (and at least 2) is a bad node."
    return words


def _latency_view(ident: str, name: str, grid: Grid, latency: list[list[float | None]], marks: Marks, failed: set) -> dict:
    """The latency map of a kind: scaled to its own median (high is dark), the bandwidth check's marks on it."""
    figures = [v for row in latency for v in row if v is not None]
    count = len(grid.nodes)
    median = statistics.median(figures)
    scale = latency_scale(median)
    what = (
        "the lowest TCP round trip iperf3 saw during the test"
        if name.startswith("tcp")
        else "ib_write_lat's typical one-way latency"
    )
    caption = f"{name} latency: {what}, µs, one figure per pair (both of its cells)"
    return {
        "id": ident,
        "caption": caption,
        "judged": f"Median {figure(median)} µs, highest {figure(max(figures))} µs: {what}. Latency is shown, "
        "not judged; the marks are the bandwidth check's.",
        "svg": Markup(heatmap(ident, caption, grid, latency, scale, marks, failed=frozenset(failed), arrow="↔")),
        "legend": _legend(
            scale, marks, slow=False, failed=bool(failed), untested=len(figures) + len(failed) < count * (count - 1)
        ),
    }
