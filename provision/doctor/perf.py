"""`doctor --perf`: pairwise bandwidth tests in rounds over the job's own interface, within a budget.

Each round is a matching (every node in at most one pair) and all its pairs run at once. Without
``--rounds`` the round-robin circle method gives every pair exactly once in N-1 rounds (N rounds
for odd N, one node resting each round); ``--rounds K`` takes K random matchings instead (a large
cluster, sampled). ``--budget`` sizes the rounds: each test's length is cut (to 1 s at least) so
that the planned rounds fit, and no round starts that would not end within the budget; the check
says how many pairs and rounds it covered. A link that comes out slow (and is not a bad node's) is
tested once more, within the budget, before it is blamed: the better figure counts.

A test is ``iperf3 -s -1`` (one-off server: it serves one client and exits) on one node, bound to
its address on the job's interface (:func:`provision.plans.nics.fabric_interface`, the interface
`launch` passes as ``btl_tcp_if_include`` / ``NCCL_SOCKET_IFNAME``), on a high port, as the SSH
user, and ``iperf3 -c ... --bidir --json`` from the other node's address on the same interface.
No client runs before the server doctor started is proven the port's listener, and its figures
count only when that server reports having served it (:mod:`provision.doctor.perf_server`): a
user holding the port makes the pair's test fail, named, never pass with her figures.
The controller holds one SSH connection per node for the whole run. Every node command runs
under ``timeout``, and the SSH call has its own limit, so a hung test ends and is named.

Where nodes have active RDMA ports, the same matchings run again with ``ib_write_bw`` on each rail
a pair shares (:mod:`provision.doctor.perf_rdma`), within the same budget; where every node has
GPUs and nccl-tests, one all-reduce over the planned rank file (:mod:`provision.doctor.perf_nccl`).
The matchings themselves: :mod:`provision.doctor.matchings`.
"""

from __future__ import annotations

import ipaddress
import random
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cached_property

from provision import defaults
from provision.doctor.matchings import Pair, circle_rounds, greedy_matchings, random_rounds
from provision.doctor.model import FAIL, CheckResult, NodeReport
from provision.doctor.perf_judge import Coverage, Link, Verdict, decide, judge_kind, verdicts_by_kind
from provision.doctor.perf_rdma import NO_PORT, RdmaPairs, RdmaRun, node_rails, rdma_preflight
from provision.doctor.perf_server import collect_command, parse_collected, parse_started, start_command
from provision.errors import ParseError, ProvisionError
from provision.facts.iperf3 import MAX_BYTES, Iperf3Result, parse_iperf3, served_cookie
from provision.inventory.model import Host
from provision.plans.nics import fabric_interface
from provision.text import printable, shown_value

DEFAULT_SECONDS = 3  # iperf3 -t: long enough for TCP to leave slow start on a fast link
ROUND_OVERHEAD_S = 1.5  # starting both ends and reading back, per round (measured: ~0.5-1.2 s here)
PORT = defaults.PERF_PORT  # a high port, the same on every node (--perf-port)
INSTALL_HINT = "install iperf3 (Debian/Ubuntu: apt-get install iperf3; RHEL/Rocky: dnf install iperf3)"


def reasons_once(why_by_host: dict[str, str]) -> dict[str, list[str]]:
    """Each reason once, with the hosts it holds for (one hint for every node without iperf3,
    not one per node).

    >>> reasons_once({"a": "no iperf3", "b": "not reached", "c": "no iperf3"})
    {'no iperf3': ['a', 'c'], 'not reached': ['b']}
    """
    grouped: dict[str, list[str]] = {}
    for host, why in why_by_host.items():
        grouped.setdefault(why, []).append(host)
    return grouped


@dataclass(frozen=True)
class PerfSettings:
    """What to test: the rounds (None: every pair), the budget in seconds (None: none), the test length."""

    rounds: int | None = None
    budget_s: float | None = None
    seconds: int = DEFAULT_SECONDS
    port: int = PORT
    seed: int | None = None  # random matchings: None draws a fresh order each run


def plan_rounds(nodes: list[str], settings: PerfSettings) -> list[list[Pair]]:
    """The matchings to run, in order (the circle from a shuffled order: a budget that stops early
    leaves no node systematically untested)."""
    rng = random.Random(settings.seed)
    if settings.rounds is not None:
        return random_rounds(nodes, settings.rounds, rng)
    order = list(nodes)
    rng.shuffle(order)
    return circle_rounds(order)


def test_length(settings: PerfSettings, planned: int) -> int:
    """The test length that lets ``planned`` rounds fit the budget (1 s at least)."""
    if settings.budget_s is None or planned == 0:
        return settings.seconds
    fits = int(settings.budget_s / planned - ROUND_OVERHEAD_S)
    return max(1, min(settings.seconds, fits))


_PREFLIGHT = "v=$(iperf3 --version 2>/dev/null | head -n 1) && printf 'iperf3 %.60s\\n' \"$v\" || echo 'iperf3 missing'"


def server_command(address: str, port: int, wait: int) -> str:
    """The one-off server on ``address``:``port`` for at most ``wait`` seconds, started as the
    listener of the port before any client runs (:func:`provision.doctor.perf_server.start_command`)."""
    return start_command(f"iperf3 -s -1 -J -B {shlex.quote(address)} -p {int(port)}", port, wait)


def client_command(source: str, target: str, port: int, seconds: int, bidir: bool) -> str:
    """``iperf3 -c`` from ``source`` to ``target``, once (the server is known to listen: a refused
    connection is a firewall, not a server still starting); its JSON capped at :data:`MAX_BYTES`."""
    test = (
        f"iperf3 -c {shlex.quote(target)} -B {shlex.quote(source)} -p {int(port)} -t {seconds}"
        + (" --bidir" if bidir else "")
        + " -J --connect-timeout 3000"
    )
    return f'out=$(timeout -k 1 {seconds + 10} {test} 2>&1); rc=$?; printf "%s\\n" "$out" | head -c {MAX_BYTES}; exit $rc'


def _iperf3_words(text: str) -> Iperf3Result | None:
    """A server's JSON report (iperf3 may add ``iperf3: exiting`` after it), or None."""
    try:
        return parse_iperf3(text[: text.rfind("}") + 1])
    except ParseError:
        return None


def job_addresses(reports: list[NodeReport]) -> tuple[str | None, dict[str, str], dict[str, str]]:
    """(the job's interface, host -> its IPv4 address there, host -> why it has none)."""
    facts = [r.facts for r in reports if r.ok and r.facts is not None]
    try:
        interface = fabric_interface(facts)
    except ProvisionError as error:
        return None, {}, {r.host: str(error)[:160] for r in reports if r.ok}
    addresses: dict[str, str] = {}
    missing: dict[str, str] = {}
    for report in reports:
        if not report.ok or report.facts is None:
            continue
        found = [a for i in report.facts.interfaces if i.name == interface for a in i.ipv4()]
        try:
            addresses[report.host] = str(ipaddress.IPv4Interface(found[0]).ip)
        except (IndexError, ValueError):
            missing[report.host] = f"no IPv4 address on {interface or 'a common interface'}"
    return interface, addresses, missing


def _version_ok(line: str) -> bool:
    """iperf3 3.7 or later (--bidir)."""
    parts = line.split()
    try:
        major, minor = (int(x) for x in parts[2].split(".")[:2])
    except (IndexError, ValueError):
        return False
    return (major, minor) >= (3, 7)


@dataclass(frozen=True)
class PerfRun:
    """Every tested link, the coverage, the nodes left out (host -> why) and the interface."""

    links: list[Link]
    coverage: Coverage
    left_out: dict[str, str]
    interface: str | None
    seconds: float
    rdma: RdmaRun | None = None  # None: no node has an active RDMA port
    nccl: CheckResult | None = None  # None: no node has a GPU

    @cached_property
    def verdicts(self) -> dict[str, Verdict]:
        """Each kind of link (TCP, each RDMA rail) judged once, when first asked: the checks, the
        ``--json`` document and ``--drain`` all read these (three judgements of every kind before)."""
        return verdicts_by_kind([*self.links, *(self.rdma.links if self.rdma is not None else [])])

    def results(self, node_count: int) -> list[CheckResult]:
        """The checks: one per kind of link (TCP, each RDMA rail), one failing for nodes that could
        not be tested."""
        kind = f"tcp {self.interface or '?'}"
        tcp = judge_kind(kind, self.links, node_count, self.coverage, self.verdicts.get(kind))
        if self.rdma is None:
            tcp = replace(tcp, detail=f"{tcp.detail}; {NO_PORT}" if tcp.detail else NO_PORT)
        rdma = self.rdma.results(self.verdicts) if self.rdma is not None else []
        results = [tcp, *rdma, *([self.nccl] if self.nccl else [])]
        if self.left_out:
            detail = "; ".join(f"{', '.join(h)}: {why}" for why, h in reasons_once(self.left_out).items())  # issue 34
            nodes = {host: f"not tested: {why}" for host, why in self.left_out.items()}
            results.append(CheckResult("perf nodes", FAIL, tuple(self.left_out), f"not tested: {detail}"[:2000], nodes=nodes))
        return results


class _Pairs:
    """Runs one pair's test on the two nodes' open sessions."""

    def __init__(
        self, kind: str, sessions: dict, addresses: dict[str, str], settings: PerfSettings, bidir: dict[str, bool]
    ) -> None:
        self.kind, self.sessions, self.addresses, self.settings, self.bidir = kind, sessions, addresses, settings, bidir

    def run(self, pair: Pair, seconds: int, limit: float) -> Link:
        """The server started and proven the port's listener, then the client, then the server's
        report: the figures count only when the server served this client (the same cookie)."""
        client, server = pair
        kind = self.kind
        folder, why = self._start(server, seconds + 8, limit)
        if folder is None:
            return Link(kind, client, server, None, error=f"the test server on {server} did not start: {why}"[:300])
        link, cookie = self._client(pair, seconds, limit)
        served, said = self._collect(server, folder, limit)
        if link.gbps is None:
            said = said or ("it served another client" if served and cookie and served != cookie else "")
            return replace(link, error=f"{link.error}; the server on {server}: {said}"[:300]) if said else link
        if not cookie or served != cookie:  # a client report without a cookie cannot be told apart either
            why = "another client reached it first" if served else "no report of the client it served"
            why += f" ({said})" if said and not served else ""
            return Link(kind, client, server, None, error=f"the test server on {server} did not serve this test: {why}"[:300])
        return link

    def _start(self, host: str, wait: int, limit: float) -> tuple[str | None, str]:
        """(the server's folder, "") once it listens; (None, why) when it did not start."""
        command = server_command(self.addresses[host], self.settings.port, wait)
        try:
            done = self.sessions[host].run(command, "", timeout=limit)
        except Exception as error:  # noqa: BLE001 - a lost node is one failed pair
            return None, f"{type(error).__name__}: {error}"[:160]
        folder, status, said = parse_started(done.stdout)
        if folder is not None:
            return folder, ""
        report = _iperf3_words(said)
        why = printable(report.error, 160) if report is not None and report.error else printable(said, 160)
        if "Address already in use" in why:
            why += f" (another process holds port {self.settings.port} on {self.addresses[host]})"
        return None, f"{why} ({status})" if why else status

    def _collect(self, host: str, folder: str, limit: float) -> tuple[str, str]:
        """(the cookie of the client the server served, or ""; what went wrong, or "")."""
        try:
            done = self.sessions[host].run(collect_command(folder), "", timeout=limit)
        except Exception as error:  # noqa: BLE001 - a lost node is one failed pair
            return "", f"{type(error).__name__}: {error}"[:160]
        status, output = parse_collected(done.stdout)
        if status is None:
            return "", "no client reached it"
        cookie = served_cookie(output)
        if status == 0:
            return cookie, ""
        report = _iperf3_words(output)
        if report is not None and report.error:
            return cookie, printable(report.error, 160)
        return cookie, printable((output.strip().splitlines() or [f"exit {status}"])[0], 160)

    def _client(self, pair: Pair, seconds: int, limit: float) -> tuple[Link, str]:
        """The link as the client measured it, and the cookie it used."""
        client, server = pair
        kind = self.kind
        both = self.bidir[client] and self.bidir[server]  # --bidir needs iperf3 3.7 at both ends
        command = client_command(self.addresses[client], self.addresses[server], self.settings.port, seconds, both)
        try:
            done = self.sessions[client].run(command, "", timeout=limit)
        except Exception as error:  # noqa: BLE001 - a hung or lost test is one failed pair, named
            return Link(kind, client, server, None, error=f"the test did not finish: {type(error).__name__}: {error}"[:200]), ""
        if done.exit_code == 124:
            return Link(kind, client, server, None, error=f"the test hung: stopped after {seconds + 10}s"), ""
        try:
            result = parse_iperf3(done.stdout)
        except ParseError as error:
            return Link(kind, client, server, None, error=f"iperf3's output on {client} does not parse: {error}"[:200]), ""
        if result.error:  # the node's words: control characters made visible
            why = printable(result.error, 200)
            if "refused" in why:
                why = f"{server} refused the test port {self.settings.port} on {self.addresses[server]} ({why}; a firewall?)"
            return Link(kind, client, server, None, error=why[:240]), result.cookie
        figures = [g for g in (result.forward_gbps, result.reverse_gbps) if g is not None]
        link = Link(kind, client, server, min(figures), result.forward_gbps, result.reverse_gbps, result.rtt_us)
        return link, result.cookie


def run_perf(hosts: list[Host], reports: list[NodeReport], settings: PerfSettings, open_session) -> PerfRun:
    """The rounds on the nodes doctor reached; ``open_session(host)`` gives an object with
    ``run(command, stdin, timeout=)`` and ``close()`` (the runner's session)."""
    started = time.monotonic()
    interface, addresses, left_out = job_addresses(reports)
    for report in reports:
        if not report.ok:
            left_out[report.host] = "not reached"
    by_name = {h.name: h for h in hosts}
    facts = {r.host: r.facts for r in reports if r.ok}
    sessions: dict = {}
    bidir: dict[str, bool] = {}

    def preflight(name: str) -> tuple[str, str]:
        try:
            session = open_session(by_name[name])
            sessions[name] = session
            line = session.run(_PREFLIGHT, "", timeout=30).stdout.strip()
        except Exception as error:  # noqa: BLE001 - one node's trouble never stops the others
            return name, f"could not connect for the tests: {type(error).__name__}: {error}"[:200]
        if not line.startswith("iperf3 iperf"):
            return name, f"no iperf3 on PATH: {INSTALL_HINT}"
        bidir[name] = _version_ok(line)
        return name, ""

    try:
        with ThreadPoolExecutor(max_workers=max(1, min(32, len(addresses)))) as pool:
            for name, why in pool.map(preflight, list(addresses)):
                if why:
                    left_out[name] = why
        nodes = [h.name for h in hosts if h.name in addresses and h.name not in left_out]
        rounds = plan_rounds(nodes, settings)
        rails = {name: node_rails(facts.get(name)) for name in nodes}
        ready, missing = rdma_preflight(sessions, rails) if any(rails.values()) else ({}, {})
        per_pair = max((len(found) for found in ready.values()), default=0) if len(ready) > 1 else 0
        seconds = test_length(settings, len(rounds) * (1 + per_pair))  # the budget holds both passes
        pairs = _Pairs(f"tcp {interface or '?'}", sessions, addresses, settings, bidir)
        links, run = _run_rounds(rounds, pairs, settings, seconds, started)
        links = _retest_slow(links, pairs, settings, seconds, started)
        rdma = None
        if any(rails.values()):  # the same matchings again, each pair on every rail it shares
            rdma_links, rdma_run = (
                _run_rounds(rounds, RdmaPairs(sessions, addresses, ready, settings.port), settings, seconds, started)
                if per_pair
                else ([], 0)
            )
            rdma = RdmaRun(rdma_links, missing, ready, rdma_run, len(rounds) if per_pair else 0, settings.budget_s)
        from provision.doctor.perf_nccl import LIMIT_S, all_reduce  # the launch planner: only when --perf runs

        left = LIMIT_S if settings.budget_s is None else int(max(10, settings.budget_s - (time.monotonic() - started)))
        nccl = all_reduce(nodes, facts, sessions, left)  # one run over the planned rank file, where GPUs are
    finally:
        for session in sessions.values():
            session.close()
    total = len(nodes) * (len(nodes) - 1) // 2
    tested = len({frozenset((link.a, link.b)) for link in links})
    coverage = Coverage(tested, total, run, len(rounds), settings.budget_s, run < len(rounds))
    return PerfRun(links, coverage, left_out, interface, time.monotonic() - started, rdma, nccl)


def _run_rounds(rounds: list[list[Pair]], pairs: _Pairs | RdmaPairs, settings: PerfSettings, seconds: int, started: float):
    """Run the rounds in order; with a budget, stop before a round that would not end within it."""
    links: list[Link] = []
    run = 0
    longest = seconds + ROUND_OVERHEAD_S
    width = max((len(r) for r in rounds), default=1)
    with ThreadPoolExecutor(max_workers=max(1, width)) as pool:
        for matching in rounds:
            elapsed = time.monotonic() - started
            if settings.budget_s is not None and elapsed + longest > settings.budget_s:
                break
            limit = seconds + 15.0
            if settings.budget_s is not None:  # a hung test still ends within the budget (and a little)
                limit = min(limit, max(seconds + 3.0, settings.budget_s - elapsed))
            began = time.monotonic()
            for found in pool.map(pairs.run, matching, [seconds] * len(matching), [limit] * len(matching)):
                links += found if isinstance(found, list) else [found]  # RDMA: one link per shared rail
            longest = max(longest, time.monotonic() - began)
            run += 1
    return links, run


def _retest_slow(links: list[Link], pairs: _Pairs, settings: PerfSettings, seconds: int, started: float) -> list[Link]:
    """Test each slow link once more (within the budget) before it is blamed on a link: on a busy
    node one test can dip; a bad cable is slow both times. The better figure counts. A bad node's
    links are not re-tested (all of them being slow is already the confirmation)."""
    verdict = decide(links)
    suspects = [*verdict.bad_links, *verdict.unsure]
    if not suspects:
        return links
    again, _ = _run_rounds(greedy_matchings(suspects), pairs, settings, seconds, started)
    better = {(link.a, link.b): link for link in again if link.gbps is not None}
    return [
        better[(link.a, link.b)]
        if (link.a, link.b) in better and link.gbps is not None and better[(link.a, link.b)].gbps > link.gbps
        else link
        for link in links
    ]


_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}


def perf_settings(perf: bool, rounds: int | None, budget: str | None, port: int = PORT) -> PerfSettings | None:
    """``--perf``, ``--rounds K``, ``--budget 60s|2m``, ``--perf-port`` checked at the edge
    (:class:`ProvisionError`: exit 2); None without ``--perf``.

    >>> perf_settings(True, None, "2m").budget_s
    120.0
    """
    if not perf:
        if rounds is not None or budget is not None:
            raise ProvisionError("--rounds and --budget size doctor --perf's tests: add --perf")
        return None
    budget_s = None
    if budget is not None:
        text = budget.strip().lower()
        number, unit = text.rstrip("smh"), text[len(text.rstrip("smh")) :]
        if unit not in _UNITS or not number.isdigit() or int(number) == 0 or len(number) > 6:
            raise ProvisionError(f"--budget {shown_value(budget[:20])}: give whole seconds, minutes or hours, e.g. 60s, 5m")
        budget_s = float(int(number) * _UNITS[unit])
    if rounds is not None and rounds < 1:
        raise ProvisionError("--rounds: at least 1")
    if not 1024 < port < 65536:
        raise ProvisionError(f"--perf-port {port}: a port above 1024 (the test runs as the SSH user, without root)")
    return PerfSettings(rounds=rounds, budget_s=budget_s, port=port)
