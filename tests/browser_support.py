"""A real browser for the tests: Debian's chromium in the provision-browser:test image
(tests/cluster/ensure-browser-image.sh, built on the debootstrap base image), started with no
network at all (``--network none``), driven by tests/cluster/browser/open_page.py over the
DevTools protocol. What it saw comes back as data; its screenshots stay in the output folder."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from cluster_support import TESTS_DIR, ensure_docker

ENSURE_BROWSER_IMAGE = TESTS_DIR / "cluster" / "ensure-browser-image.sh"
DRIVER = TESTS_DIR / "cluster" / "browser"
IMAGE = os.environ.get("PROVISION_BROWSER_IMAGE", "provision-browser:test")


def ensure_browser() -> None:
    ensure_docker()
    subprocess.run(["bash", str(ENSURE_BROWSER_IMAGE)], check=True)


def open_pages(folder: Path, names: list[str], out: Path, selectors: list[str], shots: list[str] | None) -> dict:
    """Open ``folder/<name>`` for each name in one Chromium (its own container, no network, the
    pages mounted read-only) and return open_page.py's result: per page, the load and draw
    times, console messages, log entries, exceptions, requests, and each selector's elements
    (count, outer HTML, boxes). Screenshots land in ``out`` (``shots`` None: none taken)."""
    out.mkdir(parents=True, exist_ok=True)
    command = [
        "docker", "run", "--rm", "--network", "none", "--shm-size", "512m",
        "-v", f"{DRIVER}:/driver:ro", "-v", f"{folder.resolve()}:/page:ro", "-v", f"{out.resolve()}:/out",
        IMAGE, "python3", "/driver/open_page.py", "/out", json.dumps(selectors), json.dumps(shots),
        *(f"file:///page/{name}" for name in names),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return json.loads((out / "result.json").read_text())


def problems(page: dict) -> list:
    """What a reader's browser would complain about: console messages, exceptions, warnings and
    errors in its log (a refused resource, a Content-Security-Policy report), requests beyond the
    page, failed loads."""
    logged = [entry for entry in page["log"] if entry.get("level") in ("warning", "error")]
    return page["console"] + page["exceptions"] + logged + page["requests"] + page["failed_loads"]
