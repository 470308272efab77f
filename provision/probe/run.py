"""Probe hosts in parallel (bounded), or replay saved captures; one result per host.

One SSH connection and one remote command per host. A host that fails never stops the others.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from provision import defaults
from provision.errors import NotCapturedError, ParseError, UnsafeFileError
from provision.facts.derive import derive_facts
from provision.facts.model import HostFacts
from provision.files import open_dir
from provision.inventory.model import HOST_NAME, Host
from provision.probe.gather import CAPTURE_NAMES, NOT_INSTALLED, REMOTE_COMMAND, Capture, gather_script, new_nonce, split_output
from provision.probe.store import read_capture_dir
from provision.text import shown_value

if TYPE_CHECKING:
    from provision.transport.options import SshOptions

DEFAULT_FORKS = defaults.FORKS


@dataclass
class ProbeResult:
    """One host's outcome: facts, or an error kind and message."""

    host: str
    facts: HostFacts | None = None
    error_kind: str | None = None  # unreachable, timeout, auth, hostkey, key, ssh, parse, missing, refused
    error: str | None = None
    captures: dict[str, Capture] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when facts were derived."""
        return self.facts is not None


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def facts_from_captures(host: str, captures: dict[str, Capture]) -> ProbeResult:
    """Derive facts from captures; any error doing so becomes this host's error (a parse error names the command)."""
    available = {name: c.stdout for name, c in captures.items() if c.available}
    unavailable = {name: c.why_unavailable() for name, c in captures.items() if not c.available}
    try:
        facts = derive_facts(host, available, unavailable, probed_at=_now())
    except NotCapturedError as error:
        why = unavailable.get(error.source)
        return ProbeResult(host, None, "missing", str(error) + (f" ({error.source}: {why})" if why else ""), captures)
    except ParseError as error:
        return ProbeResult(host, None, "parse", str(error), captures)
    except Exception as error:  # noqa: BLE001 - a parser defect must cost this host only, never the run
        return ProbeResult(
            host,
            None,
            "parse",
            f"cannot derive facts (a defect in provision: please report it with the captures): {type(error).__name__}: {error}"[
                :500
            ],
            captures,
        )
    return ProbeResult(host, facts, captures=captures)


def probe_host(host: Host, options: SshOptions) -> ProbeResult:
    """Run the gather script on one host and derive its facts."""
    from provision.transport.connection import run_command  # SSH only where it is used (--replay: none)
    from provision.transport.options import HostFailure

    started = time.monotonic()
    nonce = new_nonce()
    try:
        result = run_command(host, REMOTE_COMMAND, options, stdin=gather_script(nonce))
        captures = split_output(result.stdout, nonce, result.stderr)
    except HostFailure as failure:
        return ProbeResult(host.name, None, failure.kind, str(failure), seconds=time.monotonic() - started)
    except ParseError as error:
        return ProbeResult(host.name, None, "parse", str(error), seconds=time.monotonic() - started)
    outcome = facts_from_captures(host.name, captures)
    outcome.seconds = time.monotonic() - started
    return outcome


def probe_hosts(
    hosts: list[Host],
    options: SshOptions,
    forks: int = DEFAULT_FORKS,
    on_done: Callable[[ProbeResult], None] | None = None,
    workers: int | None = None,
) -> list[ProbeResult]:
    """Probe ``hosts`` with at most ``forks`` at once in all, over ``workers`` processes (None:
    one per core above a few hundred hosts; see :mod:`provision.transport.parallel`); ``on_done`` is called
    in this process as each host finishes; results come back in input order."""

    from provision.transport.parallel import fan_out

    def defect(host: Host, error: BaseException) -> ProbeResult:  # a defect costs this host only, never the run
        return ProbeResult(host.name, None, "parse", f"{type(error).__name__}: {error}"[:500])

    return fan_out(
        hosts,
        lambda host: probe_host(host, options),
        forks,
        on_done=(lambda _host, result: on_done(result)) if on_done else None,
        on_error=defect,
        workers=workers,
    )


def replay(capture_root: Path, hosts: list[str] | None = None) -> list[ProbeResult]:
    """Derive facts from saved captures (``<root>/<host>/<name>.txt``), with no SSH at all.

    The folder may be another user's (a capture copied back by hand): a host folder or file that
    is a link, a FIFO, a device, too large, or a file owned by someone else than its folder's
    owner fails that host with one line (kind ``refused``), never read
    (:func:`provision.probe.store.read_capture_dir`)."""
    try:
        root = open_dir(capture_root.resolve())  # the folder you named; below it nothing is followed
    except (FileNotFoundError, NotADirectoryError, UnsafeFileError):
        raise FileNotFoundError(f"{capture_root}: no such capture folder") from None
    try:
        if hosts:
            names = hosts
        else:
            with os.scandir(root) as entries:  # links too: each is refused by name, not skipped in silence
                names = sorted(e.name for e in entries if not e.name.startswith(".") and not e.is_file(follow_symlinks=False))
        results = []
        for name in names:
            if not HOST_NAME.match(name):  # names become file paths: no "..", no "/"
                results.append(ProbeResult(name, None, "missing", f"{shown_value(name)} is not a host name"))
                continue
            host_dir = capture_root / name
            try:
                texts = read_capture_dir(host_dir, dir_fd=root)
            except UnsafeFileError as error:
                results.append(ProbeResult(name, None, "refused", str(error)))
                continue
            except (FileNotFoundError, NotADirectoryError):
                results.append(ProbeResult(name, None, "missing", f"no capture folder {host_dir}"))
                continue
            if not texts:
                results.append(ProbeResult(name, None, "missing", f"{host_dir} holds no capture files"))
                continue
            # A missing file means the command was not available on that host.
            captures = {
                n: Capture(n, 0, texts[n], "") if n in texts else Capture(n, NOT_INSTALLED, "", "") for n in CAPTURE_NAMES
            }
            results.append(facts_from_captures(name, captures))
        return results
    finally:
        os.close(root)
