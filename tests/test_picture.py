"""Topology picture: terminal tree and SVG."""

import xml.etree.ElementTree as ET

from rich.console import Console

from plan_support import minsky
from provision.plans.dims import parse_dims
from provision.plans.picture import rich_tree, svg
from provision.plans.rankfile import plan_rankfile


def test_tree_and_svg_show_every_rank():
    plan = plan_rankfile(parse_dims("4x2x1"), [minsky("a"), minsky("b")])
    console = Console(record=True, width=120)
    console.print(rich_tree(plan))
    text = console.export_text()
    assert "rank 7: cores 1:5-9 -> GPU 3 (Tesla P100-SXM2-16GB" in text and "rack 1" in text
    document = ET.fromstring(svg(plan))
    titles = [t.text for t in document.iter("{http://www.w3.org/2000/svg}title")]
    assert "socket 1 core 9: rank 7, GPU 3" in titles
    assert sum(1 for t in titles if "rank" in t) == 40  # every one of the 2 x 20 cores is bound
