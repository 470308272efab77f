"""Open a web page in headless Chromium and report what a reader would meet (runs inside the
provision-browser:test image: python3 and Debian's chromium, nothing else).

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: commands
on its fd 3, answers and events on its fd 4, each a JSON message ended by a NUL byte), so no
port is opened and no WebSocket library is needed. For each page it writes ``<name>.png`` (the
whole page) and one JSON object in ``result.json``: how long the page took to load and to be
drawn, every console message, log entry (a refused resource, a CSP report) and exception, every
request that was not the page itself or a ``data:`` URL, and for each CSS selector asked the
outer HTML and the box on the page (``[x, y, width, height]``, CSS pixels, as laid out) of every
element it matches; each element a SHOTS selector matches (the first four)
is also shot alone, ``<name>-<n>.png``, to be looked at closely, the first one also as Chromium
emulates a reader with no colour vision and one red-green blind (``<name>-1-achromatopsia.png``,
``-deuteranopia.png``); SHOTS ``null``: no screenshot at all, for timing only.

Usage: open_page.py OUT_DIR SELECTORS_JSON SHOTS_JSON URL [URL...]
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import time

FLAGS = [
    "--headless",
    "--no-sandbox",  # root in a container: Chromium's sandbox needs user namespaces it does not get here
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
    "--user-data-dir=/tmp/open-page-profile",
]
WIDTH, HEIGHT, TALLEST = 1400, 1000, 20000
VISIONS = ("achromatopsia", "deuteranopia")  # Chromium's emulation: no colour at all (as grey print), red-green blind


class Browser:
    def __init__(self, log) -> None:
        # fd 3 <- our stdin pipe (commands), fd 4 -> our stdout pipe (answers); chromium's own stdio elsewhere
        command = "exec chromium " + " ".join(FLAGS) + " about:blank 3<&0 4>&1 0</dev/null 1>&2"
        self.process = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self.buffer = b""
        self.events: list[dict] = []
        self.next_id = 0

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 120.0) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.process.stdin.write(json.dumps(message).encode() + b"\0")
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = self._read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)
        raise TimeoutError(method)

    def wait_for(self, method: str, timeout: float = 120.0) -> dict:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while time.monotonic() < deadline:
            reply = self._read()
            if "method" in reply:
                self.events.append(reply)
                if reply["method"] == method:
                    return reply
        raise TimeoutError(method)

    def _read(self) -> dict:
        while b"\0" not in self.buffer:
            chunk = os.read(self.process.stdout.fileno(), 1 << 20)
            if not chunk:
                raise EOFError("chromium closed its DevTools pipe (see chromium.log)")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # it may close the pipe before it answers
            self.send("Browser.close", timeout=10)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def box(browser: Browser, session: str, node: int) -> list[float] | None:
    """``[x, y, width, height]`` of the element's border box on the page (None: not laid out)."""
    try:
        quad = browser.send("DOM.getBoxModel", {"nodeId": node}, session)["model"]["border"]
    except RuntimeError:  # "Could not compute box model": not rendered
        return None
    x, y = min(quad[0::2]), min(quad[1::2])
    return [round(x, 2), round(y, 2), round(max(quad[0::2]) - x, 2), round(max(quad[1::2]) - y, 2)]


def shoot(browser: Browser, session: str, node: int, path: str) -> None:
    """One element alone: its border box, at twice the pixels (small cells stay visible)."""
    x, y, width, height = box(browser, session, node)
    height = min(height, TALLEST / 2)
    clip = {"x": x, "y": y, "width": width, "height": height, "scale": 2}
    shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}, session)
    with open(path, "wb") as png:
        png.write(base64.b64decode(shot["data"]))


def open_page(browser: Browser, url: str, selectors: list[str], shots: list[str] | None, out_dir: str, name: str) -> dict:
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network", "Performance"):
        browser.send(f"{domain}.enable", session=session)
    browser.send(
        "Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, session
    )
    browser.events.clear()
    started = time.monotonic()
    browser.send("Page.navigate", {"url": url}, session)
    browser.wait_for("Page.loadEventFired")
    loaded = time.monotonic() - started
    size = browser.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
    width, height = int(size["width"]), min(int(size["height"]), TALLEST)
    if shots is not None:
        clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}, session)
        with open(os.path.join(out_dir, f"{name}.png"), "wb") as png:
            png.write(base64.b64decode(shot["data"]))
    drawn = time.monotonic() - started
    metrics = {m["name"]: m["value"] for m in browser.send("Performance.getMetrics", session=session)["metrics"]}
    root = browser.send("DOM.getDocument", {"depth": 0}, session)["root"]["nodeId"]
    found = {}
    for selector in selectors:
        nodes = browser.send("DOM.querySelectorAll", {"nodeId": root, "selector": selector}, session)["nodeIds"]
        found[selector] = {
            "count": len(nodes),
            "html": [browser.send("DOM.getOuterHTML", {"nodeId": node}, session)["outerHTML"][:600] for node in nodes[:20]],
            "boxes": [box(browser, session, node) for node in nodes[:20]],
        }
    shot_files = []
    elements = [
        node
        for selector in shots or []
        for node in browser.send("DOM.querySelectorAll", {"nodeId": root, "selector": selector}, session)["nodeIds"][:4]
    ]
    for number, node in enumerate(elements, 1):
        shot_files.append(f"{name}-{number}.png")
        shoot(browser, session, node, os.path.join(out_dir, shot_files[-1]))
        if number == 1:  # the first one again as a reader without colour vision (and grey print) sees it
            for vision in VISIONS:
                browser.send("Emulation.setEmulatedVisionDeficiency", {"type": vision}, session)
                shot_files.append(f"{name}-1-{vision}.png")
                shoot(browser, session, node, os.path.join(out_dir, shot_files[-1]))
            browser.send("Emulation.setEmulatedVisionDeficiency", {"type": "none"}, session)
    time.sleep(0.5)  # late log entries
    browser.send("Runtime.evaluate", {"expression": "1"}, session)  # drains what came meanwhile
    events = browser.events
    page_url = url.split("#")[0]
    return {
        "url": url,
        "load_s": round(loaded, 3),
        "load_and_screenshot_s": round(drawn, 3),
        "layout_s": round(metrics.get("LayoutDuration", 0.0), 3),
        "style_s": round(metrics.get("RecalcStyleDuration", 0.0), 3),
        "task_s": round(metrics.get("TaskDuration", 0.0), 3),
        "page_px": [width, int(size["height"])],
        "dom_nodes": int(metrics.get("Nodes", 0)),
        "screenshot": f"{name}.png" if shots is not None else None,
        "element_shots": shot_files,
        "console": [e["params"] for e in events if e["method"] == "Runtime.consoleAPICalled"],
        "exceptions": [e["params"] for e in events if e["method"] == "Runtime.exceptionThrown"],
        "log": [e["params"]["entry"] for e in events if e["method"] == "Log.entryAdded"],
        "requests": [
            e["params"]["request"]["url"][:200]
            for e in events
            if e["method"] == "Network.requestWillBeSent"
            and not e["params"]["request"]["url"].startswith("data:")
            and e["params"]["request"]["url"].split("#")[0] != page_url
        ],
        "failed_loads": [e["params"] for e in events if e["method"] == "Network.loadingFailed"],
        "found": found,
    }


def main() -> int:
    out_dir, selectors, shots, urls = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4:]
    results = []
    with open(os.path.join(out_dir, "chromium.log"), "wb") as log:
        browser = Browser(log)
        try:
            version = browser.send("Browser.getVersion")["product"]
            for number, url in enumerate(urls, 1):
                results.append(open_page(browser, url, selectors, shots, out_dir, f"page{number}"))
        finally:
            browser.close()
    with open(os.path.join(out_dir, "result.json"), "w") as out:
        json.dump({"version": version, "pages": results}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
