"""`doctor --report FILE.html` (provision/doctor/page.py, page_perf.py, heatmap.py): the page is a
pure function of `doctor --json`'s document. Self-contained, hostile names escaped, bad nodes and
links marked where their rows, columns and cells are, grouped by rack, 256 nodes within a size;
and the command's two ways in (after a run, from a saved JSON)."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from page_support import synthetic_document

from conftest import run_cli
from doctor_support import FACTS, cluster
from provision.doctor.layouts import layout_picture, node_layouts
from provision.doctor.page import report_page
from provision.doctor.page_perf import rack_order
from provision.doctor.perf import PerfRun
from provision.doctor.perf_judge import Coverage, Link
from provision.doctor.report import document
from provision.doctor.runner import DoctorSettings, run_checks
from provision.errors import ProvisionError

NAMES = ["p1", "p2", "p3", "p4", "p5"]


class Elements(HTMLParser):
    """Every start tag with its attributes, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


def elements(page: str) -> list[tuple[str, dict]]:
    parser = Elements()
    parser.feed(page)
    return parser.tags


def perf_run() -> PerfRun:
    """Five nodes, every pair once: p3 slow with all its peers, p2 slow towards p4 only."""
    links = []
    for i, a in enumerate(NAMES):
        for b in NAMES[i + 1 :]:
            if "p3" in (a, b):
                links.append(Link("tcp eth0", a, b, 0.09, 0.09, 0.095, 41.0))
            elif (a, b) == ("p2", "p4"):
                links.append(Link("tcp eth0", a, b, 0.1, 0.1, 9.3, 39.0))
            else:
                links.append(Link("tcp eth0", a, b, 9.4, 9.4, 9.5, 35.0))
    return PerfRun(links, Coverage(10, 10, 5, 5, 60.0), {}, "eth0", 21.0)


def five_node_document(**changes) -> dict:
    reports = cluster(size=5)
    reports = [replace(r, host=name, facts=replace(r.facts, host=name)) for r, name in zip(reports, NAMES, strict=True)]
    perf = perf_run()
    results = run_checks(reports, DoctorSettings()) + perf.results(5)
    values = {
        "perf": perf,
        "generated_at": "2025-06-01T12:00:00Z",
        "inventory": "inventory/hosts.yml",
        "racks": [{"name": "r1", "hosts": ["p1", "p2", "p3"]}, {"name": "r2", "hosts": ["p4", "p5"]}],
        "layouts": node_layouts([r.facts for r in reports]),
    } | changes
    return json.loads(json.dumps(document(results, NAMES, **values)))


def test_the_page_needs_nothing_from_outside_and_runs_no_script():
    page = report_page(five_node_document())
    tags = elements(page)
    assert page.startswith("<!DOCTYPE html>")
    assert not [tag for tag, _ in tags if tag in {"script", "link", "iframe", "object", "embed", "img", "image", "use"}]
    assert not [(tag, name) for tag, attrs in tags for name in attrs if name.startswith("on") or name in {"src", "srcset"}]
    # the only URLs: the SVG namespace (a name, never fetched) and in-page links and patterns
    assert set(re.findall(r"https?://[^\s\"'<>)]+", page)) == {"http://www.w3.org/2000/svg"}
    ids = {attrs["id"] for _, attrs in tags if "id" in attrs}
    assert {ref[1:] for ref in re.findall(r"url\(([^)]*)\)", page)} <= ids  # patterns of this page, by id
    assert all(ref.startswith("#") for ref in re.findall(r"url\(([^)]*)\)", page))
    assert {attrs.get("href") for tag, attrs in tags if tag == "a"} <= {"#checks", "#kind1", "#layouts"}
    policy = next(
        attrs["content"] for tag, attrs in tags if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"
    )
    assert policy.startswith("default-src 'none';")


def test_the_verdict_each_check_its_fix_and_the_run_are_said():
    page = report_page(five_node_document())
    assert re.search(
        r"<strong>NOT READY: 2 check\(s\) fail \(pairwise ssh, perf tcp eth0\), 1 warn \(names\)</strong> \(exit 1\)", page
    )
    assert "<td>perf tcp eth0</td>" in page and "✗ fail" in page and "✓ pass" in page
    assert "A bad node: its link speed (ethtool IFACE)" in page  # the perf check's fix
    assert "2025-06-01T12:00:00Z" in page and "inventory/hosts.yml" in page and "<dt>provision</dt><dd>0.1.0</dd>" in page


def test_the_bad_node_is_its_row_and_column_and_the_bad_link_its_two_cells():
    page = report_page(five_node_document())
    svg = page[page.index('<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" id="kind1"') :]
    svg = svg[: svg.index("</svg>")]
    # the rows in rack order: r1 = p1 p2 p3, then r2 = p4 p5; each row label sits at its row's middle
    rows = {m[1]: float(m[0]) for m in re.findall(r'<text x="\d+" y="([\d.]+)" text-anchor="end"[^>]*>(p\d)</text>', svg)}
    assert sorted(rows, key=rows.get) == ["p1", "p2", "p3", "p4", "p5"]
    mark = re.search(r'<g class="mark bad-node" data-host="p3" role="img" aria-label="([^"]+)">', svg)
    assert mark and mark[1].startswith("bad node p3: slow with 4 of 4 peers"), mark
    frames = re.findall(r'<rect x="(\d+)" y="(\d+)" width="(\d+)" height="(\d+)"/>', svg[mark.end() :])[:2]
    (_, row_y, row_w, row_h), (col_x, _, col_w, col_h) = [tuple(map(int, f)) for f in frames]
    cell = row_h - 4
    assert row_y + 2 + cell / 2 == rows["p3"] - 3  # the outlined row is p3's row
    assert row_w == col_h and col_w == cell + 4  # a full row and a full column
    # p3's row and column are hatched slow: every one of its cells is in the slow path
    slow = re.search(r'<path class="slow" stroke="url\(#pat-slow\)" d="([^"]+)"/>', svg)[1]
    assert f" {rows['p3'] - 3:g}h" in slow
    link = re.search(r'<g class="mark bad-link" data-a="p2" data-b="p4" role="img" aria-label="([^"]+)">(.*?)</g>', svg)
    assert link and html.unescape(link[1]).startswith("bad link p2-p4: 0.1 Gbit/s (p2->p4 0.1 Gbit/s, p4->p2 9.3 Gbit/s)"), link
    rings = re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="[\d.]+" height="[\d.]+" fill="none" stroke="#000"', link[2])
    assert len(rings) == 2 and rings[0] == rings[1][::-1]  # (p2, p4) and (p4, p2): mirrored cells
    assert float(rings[0][1]) + 2 + cell / 2 == rows["p2"] - 3  # the first ring is on p2's row
    # the same in words, outside the picture: a reader or grep finds each mark
    marked = page[page.index("<h4>Marked in tcp eth0</h4>") :]
    assert "<li>bad node p3: slow with 4 of 4 peers" in marked and "<li>bad link p2-p4: 0.1 Gbit/s" in marked


def test_threshold_coverage_and_latency_are_said_and_drawn():
    page = report_page(five_node_document())
    assert "Median 9.4 Gbit/s over 10 tests" in page and "A link below 4.7 Gbit/s (50% of the median) is slow" in page
    assert "Covered 10 of 10 pairs in 5 of 5 rounds within a budget of 60 s." in page
    assert 'id="kind1-latency"' in page and "Latency is shown, not judged" in page
    assert "below 1.18 Gbit/s (below 12% of the median)" in page  # the legend's darkest step, in figures
    assert page.count('class="mark bad-node" data-host="p3"') == 2  # bandwidth and latency maps both mark it


def test_a_page_from_racks_in_another_order_follows_the_inventory():
    ordered, racks = rack_order(["a1", "b1", "a2", "b2", "c1"], [("ra", ["a1", "a2"]), ("rb", ["b1", "b2"])])
    assert ordered == ["a1", "a2", "b1", "b2", "c1"] and racks == ["ra", "ra", "rb", "rb", ""]


HOSTILE = ['<script>alert("x")</script>', 'q"onmouseover="alert(1)', "esc\x1b[2J\u202eevil", "amp&lt;"]


def test_hostile_names_and_words_are_escaped_everywhere():
    doc = synthetic_document(10)
    rename = dict(zip(["p1", "p3", "p4", "p6"], HOSTILE, strict=True))  # p3: the bad node
    text = json.dumps(doc)
    for old, new in rename.items():
        text = text.replace(f'"{old}"', json.dumps(new))
    doc = json.loads(text)
    doc["checks"][0]["detail"] = "</td></tr></table><script>alert(2)</script>\x07"
    doc["checks"][1]["fix"] = "<img src=x onerror=alert(3)>"
    doc["inventory"] = "</dd><script>alert(4)</script>"
    doc["layouts"][0]["facts"]["host"] = HOSTILE[2]  # a saved JSON anyone could have edited: the layout's picture
    page = report_page(doc)
    tags = elements(page)
    assert not [tag for tag, _ in tags if tag in {"script", "img"}]
    assert not [name for _, attrs in tags for name in attrs if name.startswith("on")]
    assert "\x1b" not in page and "\u202e" not in page and "\x07" not in page
    assert "esc\\x1b[2J\\u202eevil" in page  # the bytes made visible, not obeyed
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page or "&lt;script&gt;alert(&quot;x&quot;)" in page
    assert "amp&amp;lt;" in page  # an entity in a name is shown as typed
    # the hostile node is still found by its mark, its name escaped in the attribute
    assert any(attrs.get("data-host") == 'q"onmouseover="alert(1)' for tag, attrs in tags if tag == "g")


def test_a_document_of_another_schema_or_version_is_refused():
    with pytest.raises(ProvisionError, match="not a doctor --json document"):
        report_page([{"name": "reach", "status": "pass"}])  # before version 1: a bare list
    with pytest.raises(ProvisionError, match="doctor --json version 2: provision .* reads version 1"):
        report_page({"schema": "provision.doctor", "version": 2})


def test_fields_of_the_wrong_type_read_as_absent_and_a_ragged_matrix_is_not_drawn():
    doc = synthetic_document(10)
    doc["checks"][1]["hosts"] = "p1"  # a string where a list belongs
    doc["perf"]["kinds"][0]["matrix_gbps"][2] = [1.0]
    doc["layouts"][0]["facts"]["cpu"] = "no cpu"
    page = report_page(doc)
    assert "matrix_gbps is not 10 x 10: not drawn" in page
    assert "not drawn: its facts do not read back" in page


def test_each_distinct_layout_is_drawn_once():
    gpus = FACTS.__class__(**{**FACTS.__dict__, "host": "g1"})
    from provision.facts.model import Gpu

    gpus.gpus = (Gpu(0, "Tesla V100", "0000:04:00.0", 16160, 0, 0, "sysfs-gpu"),)
    layouts = node_layouts([replace(FACTS, host="n1"), gpus, replace(FACTS, host="n2")])
    assert [entry["hosts"] for entry in layouts] == [["n1", "n2"], ["g1"]]
    assert layouts[1]["gpus"] == 1 and layouts[1]["gpu_models"] == ["Tesla V100"]
    picture = layout_picture(json.loads(json.dumps(layouts[1])))  # as a saved JSON gives it back
    assert picture.startswith("<svg") and "GPU 0" in picture and "rank 0, GPU 0" in picture


def test_256_nodes_in_16_racks_stay_small_and_marked():
    doc = synthetic_document(256, rdma=True)
    page = report_page(doc)
    size = len(page.encode())
    # two kinds (TCP and an RDMA rail), each with its bandwidth and latency map of 65,280 cells
    assert size < 2_000_000, size
    assert page.count('class="heatmap"') == 4
    assert page.count('class="mark bad-node" data-host="p3"') == 4
    assert page.count('data-a="p5" data-b="p6"') == 4 and page.count('data-a="p8" data-b="p9"') == 4
    assert page.count("<title>") < 400  # cells are not titled one by one at this size
    for rack in ("rack1", "rack16"):
        assert f"<title>{rack}</title>" in page
    assert "Each node, tcp eth0 (256)" in page and "<td>p256</td><td>rack16</td>" in page


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(five_node_document()))
    return path


def test_the_page_from_a_saved_json(saved: Path, tmp_path: Path):
    out = tmp_path / "ready.html"
    done = run_cli("doctor", "--report", str(out), "--from-json", str(saved))
    assert done.returncode == 0, done.stderr
    assert f"wrote report {out.resolve()}" in done.stderr
    assert out.read_text() == report_page(json.loads(saved.read_text()))


def test_bad_input_to_the_page_is_one_line_and_exit_2(saved: Path, tmp_path: Path):
    out = tmp_path / "ready.html"
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"schema": "provision.doctor", "version": 9}))
    cases = {
        ("--report", str(out), "--from-json", str(tmp_path / "missing.json")): "missing.json: no such file",
        ("--report", str(out), "--from-json", str(garbage)): "garbage.json: not JSON (Expecting property name",
        ("--report", str(out), "--from-json", str(newer)): "newer.json: doctor --json version 9",
        ("--from-json", str(saved)): "--from-json draws a saved run's page: add --report FILE",
        ("--report", str(out), "--from-json", str(saved), "--perf"): "leave out --perf, --drain, --json",
        ("--report", "-", "--json", "somehost"): "--report - and --json both write to stdout",
    }
    for args, said in cases.items():
        done = run_cli("doctor", *args)
        assert done.returncode == 2 and said in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not out.exists()


def test_the_page_is_never_written_through_a_planted_link(saved: Path, tmp_path: Path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "ready.html"
    out.symlink_to(victim)
    done = run_cli("doctor", "--report", str(out), "--from-json", str(saved))
    assert done.returncode == 2 and "is a link or not a regular file: refused" in done.stderr, done.stderr
    assert victim.read_text() == "keep me" and out.is_symlink()
    # before a run, too: the path is refused before any host is contacted
    done = run_cli("doctor", "nohost", "--report", str(out))
    assert done.returncode == 2 and "a link, a folder or a special file is there: refused" in done.stderr, done.stderr


def test_the_nccl_all_reduce_and_what_drain_did_are_on_the_page():
    doc = synthetic_document(10)
    nccl = {"name": "perf nccl all_reduce", "status": "pass", "hosts": [], "fix": None, "thresholds": {}, "coverage": None}
    nccl |= {"detail": "bus bandwidth 21.3 GB/s (nccl-tests' average over the sizes)", "bad_nodes": [], "bad_links": []}
    doc["checks"].append(nccl)
    doc["slurm"] = {
        "slurm_host": "ctl",
        "marker": "provision:",
        "error": None,
        "nodes": [{"host": "p3", "node": "p3", "outcome": "drained", "detail": "provision: perf tcp eth0: bad node"}],
        "not_reached": [{"host": "p7", "why": "connect: timed out"}],
        "bad_links": [],
    }
    page = report_page(doc)
    nccl_part = page[page.index('<section id="nccl">') :]
    assert "One all-reduce over every node's GPUs: no pairs, so no matrix." in nccl_part
    assert "perf nccl all_reduce: bus bandwidth 21.3 GB/s" in nccl_part
    slurm = page[page.index('<section id="slurm">') :]
    assert "<td>p3</td><td>p3</td><td>drained</td><td>provision: perf tcp eth0: bad node</td>" in slurm
    assert "<li>p7: connect: timed out</li>" in slurm
