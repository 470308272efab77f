"""The `doctor --report` page at cluster sizes: its bytes, the time to make it, the time a real
browser takes to open it; beside the same page with every matrix cell its own titled element
(what the page draws up to 32 nodes, and what a heat map drawn cell by cell costs).

How each is made: a ``doctor --json`` document of N nodes in racks of 16 (tests/page_support.py:
every pair both ways, TCP with round trips and one RDMA rail with latencies: four heat maps of
N x N cells; one bad node, one bad link, one failed test), drawn by
:func:`provision.doctor.page.report_page`; the competitor is the same call with
``provision.doctor.heatmap.TITLED`` raised above N. The browser: Debian's chromium in
provision-browser:test (tests/cluster/ensure-browser-image.sh), no network, each page opened
twice in one browser (the first opening also warms the browser up; the second is printed), the
time from ``Page.navigate`` to the load event, and Chromium's own layout time.

Printed: per size, bytes and seconds of each, and the ratios; the load average at the start and
the end (the machine is shared: the times move with it, the bytes do not).

    python bench/doctor_page.py [--nodes 64,256] [--no-browser]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from browser_support import ensure_browser, open_pages  # noqa: E402
from page_support import synthetic_document  # noqa: E402

from provision.doctor import heatmap  # noqa: E402
from provision.doctor.page import report_page  # noqa: E402


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="64,256")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    print(f"load average at the start: {load()}")
    if not args.no_browser:
        ensure_browser()
    with tempfile.TemporaryDirectory(prefix="doctor-page-bench-") as folder:
        folder = Path(folder)
        for count in sizes:
            document = synthetic_document(count, rdma=True)
            made, default = {}, heatmap.TITLED
            for name, titled in (("page", heatmap.TITLED), ("titled", count + 1)):
                heatmap.TITLED = titled
                started = time.monotonic()
                page = report_page(document)
                made[name] = (len(page.encode()), time.monotonic() - started)
                (folder / f"{name}-{count}.html").write_text(page)
            heatmap.TITLED = default
            line = (
                f"{count} nodes: page {made['page'][0] / 1e6:.2f} MB made in {made['page'][1]:.2f} s; "
                f"cell by cell {made['titled'][0] / 1e6:.2f} MB in {made['titled'][1]:.2f} s "
                f"(bytes x{made['titled'][0] / made['page'][0]:.1f})"
            )
            if not args.no_browser:
                names = [f"page-{count}.html", f"page-{count}.html", f"titled-{count}.html", f"titled-{count}.html"]
                seen = open_pages(folder, names, folder / f"out-{count}", [], None)["pages"]
                page, titled = seen[1], seen[3]
                line += (
                    f"; opened in {page['load_s']:.2f} s (layout {page['layout_s']:.2f} s), cell by cell in "
                    f"{titled['load_s']:.2f} s (layout {titled['layout_s']:.2f} s): x{titled['load_s'] / page['load_s']:.1f}"
                )
            print(line, flush=True)
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
