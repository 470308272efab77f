"""`doctor --report FILE.html`: the readiness report as one self-contained web page (pure:
``doctor --json``'s document in, HTML out; the same function draws a run just made and one saved
earlier).

What it shows: the verdict; each check with its status, hosts, detail and what to do; per kind
of link the pairwise bandwidth and latency heat maps (:mod:`provision.doctor.page_perf`), what
they were judged by and covered, the marks as text, the nodes and the links at fault; the NCCL
all-reduce; each distinct node layout as `provision topology` draws it; what ``--drain`` did;
when it ran, with which provision and which inventory.

One file that needs nothing else: the CSS is inline, the pictures are inline SVG, there is no
script and nothing is fetched (the page's Content-Security-Policy forbids both, so a browser on
an air-gapped cluster never tries). Every value from the document is HTML-escaped by the
template, its control characters made visible first (:func:`provision.resources.page_environment`):
node names and node output in it are hostile text.

>>> from provision.doctor.report import document
>>> page = report_page(document([], ["n1"]))
>>> page.startswith("<!DOCTYPE html>") and "ready: all 0 checks pass" in page
True
"""

from __future__ import annotations

from markupsafe import Markup

from provision import __version__
from provision.doctor.layouts import layout_picture
from provision.doctor.page_perf import SYMBOL, fields, items, kind_view, number, text
from provision.doctor.report import SCHEMA, VERSION
from provision.errors import ProvisionError
from provision.resources import render_page
from provision.text import shown_value

HOSTS_SHOWN = 40  # hosts listed in a check's row before "and N more"


def check_document(data: object) -> dict:
    """``data`` if it is a ``doctor --json`` document of a version this provision reads, else
    :class:`ProvisionError` saying what it is instead."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = shown_value(data.get("schema")) if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        raise ProvisionError(f"not a doctor --json document: its schema is {found}, not {SCHEMA}")
    if data.get("version") != VERSION:
        raise ProvisionError(
            f"doctor --json version {shown_value(data.get('version'))}: provision {__version__} reads version {VERSION}"
        )
    return data


def _check_rows(checks: list[dict]) -> list[dict]:
    rows = []
    for check in checks:
        status = text(check.get("status"))
        hosts = [text(host) for host in items(check.get("hosts"))]
        listed = ", ".join(hosts[:HOSTS_SHOWN]) + (f" and {len(hosts) - HOSTS_SHOWN} more" if len(hosts) > HOSTS_SHOWN else "")
        bad = []
        for entry in items(check.get("bad_nodes")):
            entry = fields(entry)
            host, why = text(entry.get("host")), text(entry.get("why"))
            if host:  # the node's own status: a node that only warns in a failing check says warn
                bad.append(f"{host} ({text(entry.get('status')) or status})" + (f": {why}" if why else ""))
        for entry in items(check.get("bad_links")):
            entry = fields(entry)
            bad.append(f"{text(entry.get('verdict'))} {text(entry.get('a'))}-{text(entry.get('b'))}: {text(entry.get('why'))}")
        rows.append(
            {
                "name": text(check.get("name")),
                "status": status if status in SYMBOL else "unknown",
                "symbol": SYMBOL.get(status, "?"),
                "hosts": listed,
                "detail": text(check.get("detail")),
                "fix": text(check.get("fix")),
                "found": bad[:HOSTS_SHOWN],
            }
        )
    return rows


def _layout_views(layouts: list) -> list[dict]:
    views = []
    for number_of, entry in enumerate(layouts, 1):
        entry = fields(entry)
        hosts = [text(host) for host in items(entry.get("hosts"))]
        models = ", ".join(text(model) for model in items(entry.get("gpu_models")))
        gpus = number(entry.get("gpus"))
        title = f"{text(entry.get('shape'))} (sockets x cores x threads), {gpus or 0:g} GPU(s)"
        title += f" {models}" if models else ""
        title += f", {text(entry.get('arch'))}: {len(hosts)} node(s)"
        try:
            picture, problem = Markup(layout_picture(entry)), ""
        except ValueError as error:
            picture, problem = None, f"not drawn: {error}"
        views.append({"number": number_of, "title": title, "hosts": ", ".join(hosts), "svg": picture, "problem": problem})
    return views


def _slurm_view(slurm: dict) -> dict | None:
    if not slurm:
        return None
    return {
        "host": text(slurm.get("slurm_host")),
        "error": text(slurm.get("error")),
        "nodes": [
            {key: text(fields(entry).get(key)) for key in ("host", "node", "outcome", "detail")}
            for entry in items(slurm.get("nodes"))
        ],
        "not_reached": [f"{text(fields(e).get('host'))}: {text(fields(e).get('why'))}" for e in items(slurm.get("not_reached"))],
    }


def page_values(data: object) -> dict:
    """What the template shows, from a ``doctor --json`` document (:func:`check_document` first)."""
    doc = check_document(data)
    checks = [fields(check) for check in items(doc.get("checks"))]
    by_name = {text(check.get("name")): check for check in checks}
    verdict = fields(doc.get("verdict"))
    nodes = [text(node) for node in items(doc.get("nodes"))]
    racks = []
    for rack in items(doc.get("racks")):
        rack = fields(rack)
        racks.append((text(rack.get("name")), [text(host) for host in items(rack.get("hosts"))]))
    perf = fields(doc.get("perf"))
    kinds = [fields(kind) for kind in items(perf.get("kinds"))]
    ready = verdict.get("ready") is True
    return {
        "title": f"provision doctor: {'ready' if ready else 'NOT READY'}, {len(nodes)} node(s)",
        "ready": ready,
        "verdict": text(verdict.get("line")) or "(no verdict line)",
        "exit_code": text(verdict.get("exit_code")),
        "meta": [
            ("run at", text(doc.get("generated_at")) or "not recorded"),
            ("inventory", text(doc.get("inventory")) or "none: hosts named on the command line"),
            ("nodes", f"{len(nodes)}" + (f" in {len(racks)} rack(s)" if racks else "")),
            ("provision", text(doc.get("provision_version")) or "not recorded"),
            ("page drawn by", f"provision {__version__} from doctor --json ({SCHEMA} version {VERSION})"),
        ],
        "checks": _check_rows(checks),
        "perf": bool(perf),
        "interface": text(perf.get("interface")),
        "left_out": [f"{text(fields(e).get('host'))}: {text(fields(e).get('why'))}" for e in items(perf.get("left_out"))],
        "kinds": [
            kind_view(number_of, kind, by_name.get(text(kind.get("check")), {}), racks) for number_of, kind in enumerate(kinds, 1)
        ],
        "nccl": [row for row in _check_rows(checks) if row["name"].startswith("perf nccl")],
        "layouts": _layout_views(items(doc.get("layouts"))),
        "slurm": _slurm_view(fields(doc.get("slurm"))),
    }


def report_page(data: object) -> str:
    """The whole page (``templates/commands/doctor-report.html.j2``) of a ``doctor --json`` document."""
    from provision.doctor.heatmap import DEFS

    return render_page("doctor-report.html.j2", page=page_values(data), defs=Markup(DEFS))
