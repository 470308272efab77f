"""Topology picture: terminal tree and SVG."""

import dataclasses
import io
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


def test_tree_shows_a_probed_gpu_name_escaped():
    """`topology --probe` plans on facts just probed (not reloaded, so not refused by the facts
    loader): the GPU name reaches the tree as a rich Text, which the CLI's escaping console does
    not see (it escapes strings): the tree escapes node text itself."""
    host = minsky("a")
    hostile = "Tesla V100\x1b]52;c;cm0gLXJm\x07\x1b[2J\u202e"
    host = dataclasses.replace(host, gpus=tuple(dataclasses.replace(gpu, name=hostile) for gpu in host.gpus))
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    console.print(rich_tree(plan_rankfile(parse_dims("4x1x1"), [host])))
    out = console.file.getvalue()
    assert "Tesla V100\\x1b]52;c;cm0gLXJm\\x07\\x1b[2J\\u202e" in out
    assert "\x1b]52" not in out and "\x07" not in out and "\u202e" not in out


SVG = "{http://www.w3.org/2000/svg}"
GLYPH = 6.6  # px: DejaVu Sans' mean advance at font-size 11 (rendered with rsvg-convert to check)


def test_svg_legend_boxes_never_cover_labels_and_the_picture_is_as_wide_as_its_content():
    # Issue 26: the legend's boxes sat 58 px apart, over "learner N" labels, and a fixed offset
    # made half the picture empty. Checked on the drawn geometry (looked at as PNG, rsvg-convert).
    for dims, hosts in (("4x1x1", [minsky("a", gpus=0)]), ("4x2x1", [minsky("a"), minsky("b")])):
        plan = plan_rankfile(parse_dims(dims), hosts, allow_no_gpu=True)
        document = ET.fromstring(svg(plan))
        top = [e for e in document if e.tag == f"{SVG}rect"]  # the legend's boxes (cores sit inside <g>)
        labels = [e for e in document if e.tag == f"{SVG}text"][1:]  # after the title
        assert len(top) == len(labels) == parse_dims(dims).x
        for index in range(len(top) - 1):
            label, box, next_box = labels[index], top[index], top[index + 1]
            if box.get("y") == next_box.get("y"):
                assert float(label.get("x")) + GLYPH * len(label.text) < float(next_box.get("x")), (label.text, dims)
        hosts_drawn = [e for g in document.iter(f"{SVG}g") for e in g.iter() if e.get("x")]
        right = max(float(e.get("x")) + float(e.get("width") or 0) + GLYPH * len(e.text or "") for e in hosts_drawn)
        assert float(document.get("width")) <= right + 40, (dims, right, document.get("width"))
