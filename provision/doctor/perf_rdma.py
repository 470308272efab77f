"""`doctor --perf` over RDMA: ``ib_write_bw`` and ``ib_write_lat`` (perftest) per rail, on the same matchings as the TCP tests.

A rail is a port both nodes of a pair have ACTIVE under the same ``device:port`` name (on RoCE with
a RoCE v2 GID): each node's rails come from :func:`provision.plans.rails.host_rails` on its facts,
the ports `launch` would hand NCCL. Each rail of a pair is tested alone (one after the other), so a
slow figure belongs to that port and its cable; links are judged per kind (``rdma mlx5_0:1``) by
:func:`provision.doctor.perf_judge.judge_kind`, each against the median of its own kind.

The commands follow perftest's README (linux-rdma/perftest, README section 5 "Running Tests"):
the server is ``ib_write_bw <options>`` with no host, the client the same options and the server's
address ("The SAME OPTIONS must be passed to both server and client"); ``-d`` the device, ``-i``
its port, ``-p`` the TCP port of the out-of-band exchange, ``-D`` seconds, ``-F`` "Do not fail even
if cpufreq_ondemand module" is loaded, ``-x`` the GID index (RoCE), ``--report_gbits`` Gbit/s;
"On all unidirectional bandwidth benchmarks, the client measures the bandwidth", so the client's
table is the figure (:func:`provision.facts.perftest.parse_write_bw`).

>>> rail = Rail("mlx5_0", 1, "InfiniBand", None)
>>> write_bw_options(rail, None, 47201, 3)
'-d mlx5_0 -i 1 -p 47201 -D 3 --report_gbits -F'
"""

from __future__ import annotations

import dataclasses
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from provision.doctor.matchings import Pair
from provision.doctor.model import FAIL, WARN, CheckResult
from provision.doctor.perf_judge import Coverage, Link, Verdict, judge_kind
from provision.doctor.perf_server import collect_command, parse_collected, parse_started, start_command
from provision.errors import ParseError
from provision.facts.model import HostFacts
from provision.facts.perftest import MAX_BYTES, parse_write_bw, parse_write_lat
from provision.plans.nics import usable_ports
from provision.plans.rails import Rail, host_rails, rail_key
from provision.text import printable

INSTALL_HINT = "install perftest (Debian/Ubuntu: apt-get install perftest; RHEL/Rocky: dnf install perftest)"
PREFLIGHT = "command -v ib_write_bw >/dev/null 2>&1 && echo 'ib_write_bw present' || echo 'ib_write_bw missing'"
NO_PORT = "no RDMA test: no node has an active RDMA port"


@dataclass(frozen=True)
class NodeRail:
    """One rail of a node and its RoCE v2 GID index (None on InfiniBand)."""

    rail: Rail
    gid_index: int | None


def node_rails(facts: HostFacts | None) -> dict[str, NodeRail]:
    """``mlx5_0:1`` -> the rail, for every usable port of the node (no GPU picks among them here:
    every rail is tested)."""
    if facts is None:
        return {}
    rails, gid = host_rails(facts, usable_ports(facts, []), [])
    return {rail.hca(): NodeRail(rail, gid.get(rail)) for rail in rails}


def shared_rails(a: dict[str, NodeRail], b: dict[str, NodeRail]) -> list[str]:
    """The ``device:port`` names both ends have, in natural order (``mlx5_2:1`` before ``mlx5_10:1``)."""
    return sorted(set(a) & set(b), key=lambda hca: rail_key(a[hca].rail))


def write_bw_options(rail: Rail, gid_index: int | None, port: int, seconds: int) -> str:
    """The options both ends pass (perftest README: the same on server and client, but ``-x``,
    which is each end's own GID index)."""
    options = f"-d {shlex.quote(rail.device)} -i {int(rail.port)} -p {int(port)} -D {int(seconds)} --report_gbits -F"
    return options + (f" -x {int(gid_index)}" if gid_index is not None else "")


def write_lat_options(rail: Rail, gid_index: int | None, port: int) -> str:
    """``ib_write_lat``'s options: as ``ib_write_bw``'s without ``-D`` (a bandwidth-test option in
    perftest's README; the latency tests run their default 1000 iterations) nor ``--report_gbits``."""
    options = f"-d {shlex.quote(rail.device)} -i {int(rail.port)} -p {int(port)} -F"
    return options + (f" -x {int(gid_index)}" if gid_index is not None else "")


def rdma_server_command(options: str, port: int, wait: int, tool: str = "ib_write_bw") -> str:
    """``tool`` waiting for one client for at most ``wait`` seconds, started as the listener of
    ``port`` (its out-of-band exchange) before any client runs
    (:func:`provision.doctor.perf_server.start_command`; perftest opens it after the device, so
    up to 10 s)."""
    return start_command(f"{tool} {options}", port, wait, listen_wait=10.0)


def rdma_client_command(options: str, target: str, seconds: int, tool: str = "ib_write_bw") -> str:
    """``tool`` to ``target``, once (the server is known to listen: perftest's "Couldn't connect
    to HOST:PORT", src/perftest_communication.c, is then a firewall); output capped."""
    return (
        f"out=$(timeout -k 1 {seconds + 12} {tool} {options} {shlex.quote(target)} 2>&1); rc=$?; "
        f'printf "%s\\n" "$out" | head -c {MAX_BYTES}; exit $rc'
    )


class RdmaPairs:
    """Runs one pair's ``ib_write_bw`` on each rail the two nodes share, one rail at a time."""

    def __init__(self, sessions: dict, addresses: dict[str, str], rails: dict[str, dict[str, NodeRail]], port: int) -> None:
        self.sessions, self.addresses, self.rails, self.port = sessions, addresses, rails, port

    def run(self, pair: Pair, seconds: int, limit: float) -> list[Link]:
        client, server = pair
        if client not in self.rails or server not in self.rails:
            return []
        return [self._one(pair, hca, seconds, limit) for hca in shared_rails(self.rails[client], self.rails[server])]

    def _one(self, pair: Pair, hca: str, seconds: int, limit: float) -> Link:
        client, server = pair
        kind = f"rdma {hca}"
        mine, theirs = self.rails[client][hca], self.rails[server][hca]
        served_options = write_bw_options(theirs.rail, theirs.gid_index, self.port, seconds)
        folder, why = self._start(server, served_options, seconds + 10, limit)
        if folder is None:
            return Link(kind, client, server, None, error=f"the test server on {server} did not start: {why}"[:300])
        options = write_bw_options(mine.rail, mine.gid_index, self.port, seconds)
        link = self._client(kind, pair, options, seconds, limit)
        server_error = self._collect(server, folder, limit)
        if link.gbps is None and server_error:
            return Link(kind, client, server, None, error=f"{link.error}; the server on {server}: {server_error}"[:300])
        if link.gbps is None:
            return link
        return dataclasses.replace(link, latency_us=self._latency(pair, mine, theirs, seconds, limit))

    def _latency(self, pair: Pair, mine: NodeRail, theirs: NodeRail, seconds: int, limit: float) -> float | None:
        """``ib_write_lat``'s typical latency on the rail; None when it did not run or parse (the
        bandwidth figure stands: the latency is reported, not judged)."""
        client, server = pair
        served = write_lat_options(theirs.rail, theirs.gid_index, self.port)
        options = write_lat_options(mine.rail, mine.gid_index, self.port)
        folder, _ = self._start(server, served, seconds + 10, limit, "ib_write_lat")
        if folder is None:
            return None
        try:
            done = self.sessions[client].run(
                rdma_client_command(options, self.addresses[server], seconds, "ib_write_lat"), "", timeout=limit
            )
            return parse_write_lat(done.stdout) if done.exit_code == 0 else None
        except Exception:  # noqa: BLE001 - ParseError, a lost node: no latency figure
            return None
        finally:
            self._collect(server, folder, limit)

    def _start(self, host: str, options: str, wait: int, limit: float, tool: str = "ib_write_bw") -> tuple[str | None, str]:
        """(the server's folder, "") once it listens on the port; (None, why) when it did not start."""
        try:
            done = self.sessions[host].run(rdma_server_command(options, self.port, wait, tool), "", timeout=limit)
        except Exception as error:  # noqa: BLE001 - a lost node is one failed pair
            return None, f"{type(error).__name__}: {error}"[:160]
        folder, status, said = parse_started(done.stdout)
        if folder is not None:
            return folder, ""
        last = printable((said.strip().splitlines() or [""])[-1], 160)
        return None, f"{last} ({status})" if last else status

    def _collect(self, host: str, folder: str, limit: float) -> str:
        """What went wrong on the server's side ("" when it served its client and ended)."""
        try:
            done = self.sessions[host].run(collect_command(folder), "", timeout=limit)
        except Exception as error:  # noqa: BLE001 - a lost node is one failed pair
            return f"{type(error).__name__}: {error}"[:160]
        status, output = parse_collected(done.stdout)
        if status is None:
            return "no client reached it"
        if status == 0:
            return ""
        return printable((output.strip().splitlines() or [f"exit {status}"])[-1], 160)

    def _client(self, kind: str, pair: Pair, options: str, seconds: int, limit: float) -> Link:
        client, server = pair
        try:
            done = self.sessions[client].run(rdma_client_command(options, self.addresses[server], seconds), "", timeout=limit)
        except Exception as error:  # noqa: BLE001 - a hung or lost test is one failed pair, named
            return Link(kind, client, server, None, error=f"the test did not finish: {type(error).__name__}: {error}"[:200])
        if done.exit_code == 124:
            return Link(kind, client, server, None, error=f"the test hung: stopped after {seconds + 12}s")
        try:
            return Link(kind, client, server, parse_write_bw(done.stdout))
        except ParseError as error:
            last = printable((done.stdout.strip().splitlines() or [""])[-1], 120)
            why = f"ib_write_bw's output on {client} does not parse: {error}" + (f" ({last})" if last else "")
            return Link(kind, client, server, None, error=why[:240])


@dataclass(frozen=True)
class RdmaRun:
    """The RDMA links, the nodes with ports but no ``ib_write_bw`` (host -> its rails), and what
    the rounds covered."""

    links: list[Link]
    missing: dict[str, str]
    rails: dict[str, dict[str, NodeRail]]  # the nodes tested over RDMA
    rounds_run: int = 0
    rounds_planned: int = 0
    budget_s: float | None = None

    def results(self, verdicts: dict[str, Verdict] | None = None) -> list[CheckResult]:
        """One check per rail kind, and one failing for nodes that have ports but no perftest
        (``verdicts``: each kind's links already judged, :attr:`PerfRun.verdicts
        <provision.doctor.perf.PerfRun.verdicts>`)."""
        results = []
        for kind in sorted({link.kind for link in self.links}, key=lambda k: rail_key(self._rail(k))):
            hca = kind.split(" ", 1)[1]
            nodes = [host for host, rails in self.rails.items() if hca in rails]
            links = [link for link in self.links if link.kind == kind]
            coverage = Coverage(
                len({frozenset((link.a, link.b)) for link in links}),
                len(nodes) * (len(nodes) - 1) // 2,
                self.rounds_run,
                self.rounds_planned,
                self.budget_s,
                self.rounds_run < self.rounds_planned,
            )
            results.append(judge_kind(kind, links, len(nodes), coverage, (verdicts or {}).get(kind)))
        if not self.links and len(self.rails) > 1:
            listing = "; ".join(f"{host} {', '.join(rails)}" for host, rails in self.rails.items())
            results.append(
                CheckResult("perf rdma", WARN, (), f"no pair of nodes shares an active RDMA port (rail): {listing}"[:2000])
            )
        if self.missing:
            listing = "; ".join(f"{host} (ports {rails})" for host, rails in self.missing.items())
            detail = f"no ib_write_bw on PATH on nodes with active RDMA ports: {listing}: {INSTALL_HINT}"
            results.append(CheckResult("perf rdma", FAIL, tuple(self.missing), detail[:2000]))
        return results

    def _rail(self, kind: str) -> Rail:
        hca = kind.split(" ", 1)[1]
        for rails in self.rails.values():
            if hca in rails:
                return rails[hca].rail
        device, _, port = hca.rpartition(":")
        return Rail(device, int(port) if port.isdigit() else 0, None, None)


def rdma_preflight(
    sessions: dict, rails: dict[str, dict[str, NodeRail]]
) -> tuple[dict[str, dict[str, NodeRail]], dict[str, str]]:
    """(the nodes with rails and ``ib_write_bw``, host -> its rails for those without it). A node
    whose check fails to run counts as missing the tool, said the same way."""

    def check(host: str) -> tuple[str, bool]:
        try:
            return host, sessions[host].run(PREFLIGHT, "", timeout=30).stdout.strip() == "ib_write_bw present"
        except Exception:  # noqa: BLE001 - one node's trouble never stops the others
            return host, False

    with_rails = [host for host, found in rails.items() if found and host in sessions]
    ready: dict[str, dict[str, NodeRail]] = {}
    missing: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(32, len(with_rails)))) as pool:
        for host, present in pool.map(check, with_rails):
            if present:
                ready[host] = rails[host]
            else:
                missing[host] = ", ".join(rails[host])
    return ready, missing
