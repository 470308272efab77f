"""`provision doctor --perf --report` from a real run on sshd containers, opened in a real browser.

Six nodes of the perf image (real iperf3; tests/cluster/page-compose.yml) in two racks (r1: p4, p5,
p6; r2: p1, p2, p3: the matrix follows the racks, not the names), with two
faults planted at once as tests/test_doctor_perf_cluster.py plants them: tc tbf on p3's eth0 (a
bad node) and an htb class with a u32 ``match ip dst`` filter on p2 towards p4 only (a bad link).
The page doctor writes, and the same page drawn again from the saved ``--json``, are opened by
Debian's chromium (tests/browser_support.py: its own container, no network at all). The test
finds, as the browser laid them out, p3's outlined row and column across from p3's labels and
the ringed cell where p2's row meets p4's column; no console message, no log warning, no
request. A 256-node page is opened beside it for its size and render time. Screenshots of the
whole pages and of each heat map stay in build/doctor-page/ (OUTPUT) to be looked at.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from browser_support import ensure_browser, open_pages, problems
from page_support import synthetic_document

from cluster_support import TESTS_DIR, Cluster, compose_cluster, ensure_docker
from conftest import run_cli
from provision.doctor.page import report_page

COMPOSE = TESTS_DIR / "cluster" / "page-compose.yml"
ENSURE_PERF_IMAGE = TESTS_DIR / "cluster" / "ensure-perf-image.sh"
NODES = ("p1", "p2", "p3", "p4", "p5", "p6")
OUTPUT = TESTS_DIR.parent / "build" / "doctor-page"  # kept: the screenshots, the pages, what the browser saw
pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def perf_cluster(tmp_path_factory):
    ensure_docker()
    subprocess.run(["bash", str(ENSURE_PERF_IMAGE)], check=True)
    ensure_browser()
    material = tmp_path_factory.mktemp("page")
    with compose_cluster(COMPOSE, "PERF_DIR", f"provpage{os.getpid()}", material, NODES) as cluster:
        inventory = material / "hosts.yml"
        racks = "racks:\n  - {name: r1, hosts: [p4, p5, p6]}\n  - {name: r2, hosts: [p1, p2, p3]}\n"
        inventory.write_text(cluster.inventory_yaml(NODES) + racks)
        yield cluster, inventory, material / "known_hosts"


def _address(cluster: Cluster, node: str) -> str:
    return cluster.docker_exec(node, "sh", "-c", "ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1").strip()


def _faults(cluster: Cluster) -> list[tuple[str, str]]:
    """p3 throttled on eth0 to 10 Mbit/s with tbf (a bad node); p2 throttled towards p4 only to
    10 Mbit/s with an htb class and a u32 filter (a bad link); every other way out capped at
    100 Mbit/s (htb), so that a healthy link is a link and not the test machine's CPUs: uncapped,
    two containers on a shared 2-core host measure 0.24 to 1.2 Gbit/s at a load of 20, and a
    node can come out slow with 4 of its 5 peers by itself. Returns what undoes them."""
    cluster.docker_exec(
        "p3", "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "10mbit", "burst", "32kbit", "latency", "50ms"
    )
    capped = [
        "tc qdisc add dev eth0 root handle 1: htb default 10",
        "tc class add dev eth0 parent 1: classid 1:10 htb rate 100mbit ceil 100mbit",
    ]
    for node in NODES:
        if node not in ("p2", "p3"):
            cluster.docker_exec(node, "sh", "-ec", "; ".join(capped))
    towards_p4 = [
        "tc class add dev eth0 parent 1: classid 1:20 htb rate 10mbit ceil 10mbit",
        f"tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst {_address(cluster, 'p4')}/32 flowid 1:20",
    ]
    cluster.docker_exec("p2", "sh", "-ec", "; ".join(capped + towards_p4))
    return [(node, "tc qdisc del dev eth0 root") for node in NODES]


def _named_boxes(elements: dict) -> dict[str, list[float]]:
    """A label's text -> its box, in page order (``<text ...>p3</text>``)."""
    names = [html.rsplit("</text>", 1)[0].rsplit(">", 1)[1] for html in elements["html"]]
    return dict(zip(names, elements["boxes"], strict=True))


def _centre(box: list[float]) -> tuple[float, float]:
    return box[0] + box[2] / 2, box[1] + box[3] / 2


def _inside(point: tuple[float, float], box: list[float]) -> bool:
    return box[0] <= point[0] <= box[0] + box[2] and box[1] <= point[1] <= box[1] + box[3]


ROW_LABELS = "svg#kind1 text[text-anchor='end']"  # the rows' names, in page order
COLUMN_LABELS = "svg#kind1 text[transform*='rotate(-90)']"
BAD_NODE = "svg#kind1 g.mark.bad-node[data-host='p3'] > g:last-of-type > rect"  # the row's frame, then the column's
BAD_LINK = "svg#kind1 g.mark.bad-link rect[stroke='#000']"  # a ring per direction
SELECTORS = [ROW_LABELS, COLUMN_LABELS, BAD_NODE, BAD_LINK, "g.mark.bad-node", "g.mark.bad-link", ".marks li", "svg.heatmap"]


def test_the_report_of_a_real_run_shows_the_bad_node_and_link_in_a_browser(perf_cluster):
    cluster, inventory, known = perf_cluster
    if OUTPUT.exists():
        for old in OUTPUT.iterdir():
            old.unlink()
    OUTPUT.mkdir(parents=True, exist_ok=True)
    undo = _faults(cluster)
    try:
        done = run_cli(
            "doctor", "-i", str(inventory), "--known-hosts", str(known), "--perf", "--json", "--report", str(OUTPUT / "run.html")
        )
    finally:
        for node, command in undo:
            cluster.docker_exec(node, "sh", "-c", command)
    assert done.returncode == 1 and done.stdout.strip(), done.stderr
    (OUTPUT / "run.json").write_text(done.stdout)
    saved = json.loads(done.stdout)
    tcp = next(check for check in saved["checks"] if check["name"] == "perf tcp eth0")
    assert [node["host"] for node in tcp["bad_nodes"]] == ["p3"], tcp
    assert [{link["a"], link["b"]} for link in tcp["bad_links"]] == [{"p2", "p4"}], tcp
    assert saved["racks"] == [{"name": "r1", "hosts": ["p4", "p5", "p6"]}, {"name": "r2", "hosts": ["p1", "p2", "p3"]}]
    assert [entry["hosts"] for entry in saved["layouts"]] == [list(NODES)]  # six containers of one image: one layout
    # the same page again from the saved JSON, as a run drawn later or elsewhere is
    again = run_cli("doctor", "--report", str(OUTPUT / "from-json.html"), "--from-json", str(OUTPUT / "run.json"))
    assert again.returncode == 0, again.stderr
    assert (OUTPUT / "from-json.html").read_text() == (OUTPUT / "run.html").read_text() == report_page(saved)
    (OUTPUT / "256-nodes.html").write_text(report_page(synthetic_document(256, rdma=True)))

    seen = open_pages(OUTPUT, ["run.html", "256-nodes.html"], OUTPUT, SELECTORS, ["svg.heatmap", "section.layout svg"])
    run, large = seen["pages"]
    assert problems(run) == [] and problems(large) == [], (problems(run), problems(large))
    found = run["found"]
    rows, columns = _named_boxes(found[ROW_LABELS]), _named_boxes(found[COLUMN_LABELS])
    assert list(rows) == ["p4", "p5", "p6", "p1", "p2", "p3"] and list(columns) == list(rows)  # rack r1, then r2
    assert [box[1] for box in rows.values()] == sorted(box[1] for box in rows.values())  # top to bottom, as listed
    row_frame, column_frame = found[BAD_NODE]["boxes"]
    # p3's row frame spans the matrix at p3's row; its column frame stands under p3's column label
    assert _inside((row_frame[0] + row_frame[2] / 2, _centre(rows["p3"])[1]), row_frame), (row_frame, rows["p3"])
    assert not _inside((row_frame[0] + 5, _centre(rows["p2"])[1]), row_frame)
    assert _inside((_centre(columns["p3"])[0], column_frame[1] + column_frame[3] / 2), column_frame)
    assert row_frame[2] > 4 * row_frame[3] and column_frame[3] > 4 * column_frame[2]  # a whole row, a whole column
    rings = found[BAD_LINK]["boxes"]
    assert len(rings) == 2
    where = {(a, b): (_centre(columns[b])[0], _centre(rows[a])[1]) for a, b in (("p2", "p4"), ("p4", "p2"))}
    assert sorted(_inside(point, ring) for point in where.values() for ring in rings) == [False, False, True, True]
    marks = " ".join(found[".marks li"]["html"])
    assert "bad node p3: slow with 5 of 5 peers" in marks and ("bad link p2-p4" in marks or "bad link p4-p2" in marks)
    assert found["g.mark.bad-node"]["count"] == 2 and found["g.mark.bad-link"]["count"] == 2  # bandwidth and latency
    assert large["found"]["g.mark.bad-node"]["count"] == 4 and large["found"]["svg.heatmap"]["count"] == 4
    measured = {
        "256_nodes_bytes": (OUTPUT / "256-nodes.html").stat().st_size,
        "256_nodes_load_s": large["load_s"],
        "256_nodes_load_and_screenshot_s": large["load_and_screenshot_s"],
        "256_nodes_layout_s": large["layout_s"],
        "run_load_s": run["load_s"],
        "browser": seen["version"],
        "load_average": Path("/proc/loadavg").read_text().split()[:3],
    }
    (OUTPUT / "measured.json").write_text(json.dumps(measured, indent=1))
    print(f"doctor page: {json.dumps(measured)}; screenshots in {OUTPUT}")
