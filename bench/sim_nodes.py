#!/usr/bin/env python3
"""Simulated SSH nodes for the scale bench (issue 37, item 4): thousands of hosts on this machine
only, each its own loopback address of 127.0.0.0/8 (on Linux every 127.x.y.z is local, routed to
``lo`` with no setup: ``ip route show table local`` lists ``local 127.0.0.0/8 dev lo``) with its
own ed25519 host key, served by a few asyncssh processes.

A simulated node runs nothing. It recognises the script it is sent and answers from a real
capture, keyed by what was asked:

- provision's gather script (probe's one round trip: ``sh -s``, the script on stdin): the step
  names are read from the script's own frame lines, and each step is answered with the capture
  folder's ``<step>.txt`` (a real node's output, tests/fixtures/captures/node-hwloc by default),
  exit status 0, or 127 with nothing when the folder holds no such file (what ``probe --replay``
  takes a missing file to mean); framed as the script frames it, with the nonce the script carries.
- setup-cluster's state round trip (``sh -s`` or its sudo wrapper; a become script's first stdin
  line, the password, is skipped): each fact command of the script, nonce taken out, is looked up
  among the fact commands of a recorded real round trip (tests/fixtures/round-trips/, written by
  bench/capture_round_trips.py), and answered with what the real node printed for it.

Only the node's identity differs from the capture: the captured node's host name, addresses and
host key are replaced, wherever a reply holds them, by the simulated node's own name, address and
the key it serves. Anything else is refused the way a failing node fails: a remote command it does
not know exits 127; a script asking a fact no capture answers, or one that applies a change (a
simulated node applies nothing), exits 1 with one line on stderr naming it, before any frame.

Bounded: at most :data:`MAX_HOSTS` hosts, addresses only in 127.0.0.0/8, and every server process
stops by itself at its deadline (or when the process that started it goes away).

    with SimCluster(work, count=1024, deadline=900) as cluster:
        cluster.write_inventory(work / "hosts.yml")   # then run provision against it
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_HOSTS = 16384
LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
PORT = 2222  # on every simulated address (not 22: the machine's own sshd may hold 0.0.0.0:22)
USER = "mpi"
PROBE_CAPTURES = ROOT / "tests" / "fixtures" / "captures" / "node-hwloc"
ROUND_TRIPS = ROOT / "tests" / "fixtures" / "round-trips" / "setup-users-no-change.json"
HOSTS_PER_PROCESS = 1024  # listeners (one per address) per server process

_NONCE = re.compile(r"^PROVISION_FRAME='@@([0-9a-f]{8,128})@@'$", re.MULTILINE)
_GATHER_STEP = re.compile(  # a step's two frame lines: stdout's, then stderr's
    r"""^printf '%s (\S+)\\n' "\$PROVISION_FRAME"; printf '%s \1\\n' "\$PROVISION_FRAME" >&2$""", re.MULTILINE
)
_FACT = re.compile(  # a fact read: root's own, or one inside a user's batch (no redirections there)
    r"""^printf '%s fact %s\\n' "\$PROVISION_FRAME" (\d+)\n\( (.*?)\n\)(?: </dev/null 2>/dev/null)?\nprintf '\\n'$""",
    re.MULTILINE | re.DOTALL,
)
_BATCH = re.compile(  # one user's reads in one runuser, framed with the batch's own marker, through a pipe
    r"""^printf '%s batch %s\\n' "\$PROVISION_FRAME" (\d+)\n(?:[^\n]*\n)*?\( (?:\( )?runuser -u \S+ -- sh -s <<'(\S+)'\n"""
    r"""\( PROVISION_FRAME='@@([0-9a-f]+)@@'\n(.*?)\n\) </dev/null\n\2\n""",
    re.MULTILINE | re.DOTALL,
)
_STEP = re.compile(r"""^printf '%s step %s\\n' "\$PROVISION_FRAME" \d+$""", re.MULTILINE)


@dataclass(frozen=True)
class SimHost:
    """One simulated node: its name (its inventory name and the host name it reports), its
    loopback address, its host key (the raw ed25519 seed) and that key's public line."""

    name: str
    address: str
    seed: bytes
    public: str  # "ssh-ed25519 AAAA..."


def address_of(index: int) -> str:
    """The ``index``-th simulated address: 127.1.0.1, 127.1.0.2, ... 250 per /24, none ending in 0 or 255.

    >>> address_of(0), address_of(249), address_of(250)
    ('127.1.0.1', '127.1.0.250', '127.1.1.1')
    """
    if not 0 <= index < MAX_HOSTS:
        raise ValueError(f"at most {MAX_HOSTS} simulated hosts")
    address = f"127.1.{index // 250}.{1 + index % 250}"
    if ipaddress.ip_address(address) not in LOOPBACK:  # never anything but loopback
        raise ValueError(address)
    return address


def make_hosts(count: int) -> list[SimHost]:
    """``count`` hosts with fresh ed25519 host keys (about 0.25 ms each)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    if not 0 < count <= MAX_HOSTS:
        raise ValueError(f"1 to {MAX_HOSTS} simulated hosts, not {count}")
    hosts = []
    for index in range(count):
        key = ed25519.Ed25519PrivateKey.generate()
        seed = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
        hosts.append(SimHost(f"sim{index + 1:05d}", address_of(index), seed, public))
    return hosts


def write_hosts(hosts: list[SimHost], path: Path) -> None:
    """The host list the server processes read: ``name address seedhex public`` per line (0600)."""
    text = "".join(f"{h.name} {h.address} {h.seed.hex()} {h.public}\n" for h in hosts)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def read_hosts(path: Path) -> list[SimHost]:
    hosts = []
    for line in path.read_text().splitlines():
        name, address, seed, kind, blob = line.split()
        if ipaddress.ip_address(address) not in LOOPBACK:
            raise ValueError(f"{address} is not a loopback address: refused")
        hosts.append(SimHost(name, address, bytes.fromhex(seed), f"{kind} {blob}"))
    return hosts


class Answers:
    """The replies of every simulated node, from the real captures (see the module's docstring)."""

    def __init__(self, probe_captures: Path = PROBE_CAPTURES, round_trips: Path = ROUND_TRIPS):
        self.probe = {p.name[:-4]: p.read_text() for p in sorted(probe_captures.glob("*.txt"))}
        self.probe_host = self.probe.get("hostname", "").strip()  # the captured node's name
        document = json.loads(round_trips.read_text())
        node = document["node"]
        self.setup_node = node
        self.commands: set[str] = set()
        self.facts: dict[str, str] = {}  # a fact command (nonce as NONCE) -> what the real node printed
        self.counts: Counter[str] = Counter()  # replies given, by kind
        for trip in document["round_trips"]:
            self.commands.add(trip["command"])
            script = _script_of(trip["command"], trip["stdin"])
            bodies = _frames(trip["stdout"])
            for match in _BATCH.finditer(script):  # a user's reads: their bodies inside the batch's
                inner = _frames(bodies[("batch", (int(match.group(1)),))], f"@@{match.group(3)}@@")
                for index, command in _facts(match.group(4)):
                    self.facts[command] = inner[("fact", (int(index),))]
            for index, command in _facts(script):
                self.facts.setdefault(command, bodies.get(("fact", (int(index),)), ""))

    # -- identity ------------------------------------------------------------------------------
    def _own_setup(self, text: str, host: SimHost) -> str:
        node = self.setup_node
        for key in node["host_keys"]:
            text = text.replace(key, host.public)
        for address in node["addresses"]:
            text = re.sub(rf"(?m)^a {re.escape(address)}$", f"a {host.address}", text)
        for name in {node["fqdn"], node["hostname"]}:
            text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", host.name, text)
        return text

    # -- replies -------------------------------------------------------------------------------
    def reply(self, host: SimHost, command: str, stdin: str) -> tuple[str, str, int]:
        """(stdout, stderr, exit status) of ``command`` with ``stdin`` on ``host``; counted in
        :attr:`counts` by kind (gather, setup) and outcome (``setup failed``: refused)."""
        if command == "sh -s" and stdin.startswith("#!/bin/sh\n# provision ") and "fact capture" in stdin.split("\n", 2)[1]:
            kind, answer = "gather", self._gather(host, stdin)
        elif command in self.commands:
            kind, answer = "setup", self._setup(host, _script_of(command, stdin))
        else:
            kind, answer = "unknown", ("", f"sh: simulated node {host.name}: no capture answers this command\n", 127)
        self.counts[kind + (" failed" if answer[2] else "")] += 1
        return answer

    def _gather(self, host: SimHost, script: str) -> tuple[str, str, int]:
        nonce = _NONCE.search(script)
        if nonce is None:
            return "", "simulated node: the gather script holds no frame marker\n", 1
        frame = f"@@{nonce.group(1)}@@"
        out, err = [], []
        for step in _GATHER_STEP.findall(script):
            text = self.probe.get(step)
            if step == "hostname" and text is not None:
                text = f"{host.name}\n"
            out.append(f"{frame} {step}\n{text or ''}\n{frame} .rc {0 if text is not None else 127}\n")
            err.append(f"{frame} {step}\n" + ("" if text is not None else f"{step}: not installed (no capture of this step)\n"))
        return "".join(out), "".join(err), 0

    def _setup(self, host: SimHost, script: str) -> tuple[str, str, int]:
        nonce = _NONCE.search(script)
        if nonce is None:
            return "", "simulated node: the script holds no frame marker\n", 1
        if _STEP.search(script):
            return "", f"simulated node {host.name}: asked to apply a change; it applies none (not converged?)\n", 1
        normal = script.replace(nonce.group(1), "NONCE")
        frame = f"@@{nonce.group(1)}@@"
        try:
            answers = [answer for _position, answer in sorted(self._answers(host, normal, frame))]
        except LookupError as missing:
            return "", f"simulated node {host.name}: no capture answers fact {missing}\n", 1
        return "".join([f"{frame} begin\n", *answers, f"{frame} end\n"]), "", 0

    def _answers(self, host: SimHost, script: str, frame: str):
        """(position in the script, reply) of each root fact and each user's batch."""
        batches = list(_BATCH.finditer(script))
        for match in batches:
            inner = f"@@{match.group(3)}@@"
            facts = "".join(
                f"{inner} fact {index}\n{self._body(host, index, command)}\n" for index, command in _facts(match.group(4))
            )
            yield match.start(), f"{frame} batch {match.group(1)}\n{facts}{inner} done\n\n"
        for match in _FACT.finditer(script):
            if not any(batch.start() <= match.start() < batch.end() for batch in batches):
                yield match.start(), f"{frame} fact {match.group(1)}\n{self._body(host, match.group(1), match.group(2))}\n"

    def _body(self, host: SimHost, index: str, command: str) -> str:
        body = self.facts.get(command)
        if body is None:
            raise LookupError(f"{index} ({command.splitlines()[0][:120]})")
        return self._own_setup(body, host)


def _facts(script: str) -> list[tuple[str, str]]:
    """(index, read command) of each fact of a script or of a batch's script."""
    return [(match.group(1), match.group(2)) for match in _FACT.finditer(script)]


def _script_of(command: str, stdin: str) -> str:
    """The script of a round trip: stdin, without the password line a become command reads first."""
    return stdin.split("\n", 1)[1] if command != "sh -s" else stdin


def _frames(stdout: str, marker: str = "@@NONCE@@") -> dict[tuple[str, tuple[int, ...]], str]:
    """A recorded reply's frame bodies by (label, numbers); ``marker``: the frame marker (the
    run's nonce written as NONCE, or a batch's own)."""
    line = re.compile(rf"^{re.escape(marker)} (\S+)((?: \d+)*)$", re.MULTILINE)
    matches = list(line.finditer(stdout))
    bodies = {}
    for position, match in enumerate(matches):
        end = matches[position + 1].start() if position + 1 < len(matches) else len(stdout)
        body = stdout[match.end() + 1 : end]
        bodies[(match.group(1), tuple(int(n) for n in match.group(2).split()))] = body[:-1] if body.endswith("\n") else body
    return bodies


# -- the server processes ------------------------------------------------------------------------
async def _serve(hosts: list[SimHost], answers: Answers, client_key: str, port: int, deadline: float, counts: Path) -> None:
    import asyncssh
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    allowed = asyncssh.import_public_key(client_key)

    class Server(asyncssh.SSHServer):
        def begin_auth(self, username: str) -> bool:
            return True

        def public_key_auth_supported(self) -> bool:
            return True

        def validate_public_key(self, username: str, key) -> bool:
            return username == USER and key.public_data == allowed.public_data

    def handler(host: SimHost):
        async def handle(process) -> None:
            data = await process.stdin.read()
            out, err, code = answers.reply(host, process.command or "", data.decode(errors="replace"))
            process.stdout.write(out.encode())
            process.stderr.write(err.encode())
            process.exit(code)

        return handle

    servers = []
    for host in hosts:
        private = ed25519.Ed25519PrivateKey.from_private_bytes(host.seed)
        pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
        servers.append(
            await asyncssh.create_server(
                Server,
                host.address,
                port,
                server_host_keys=[asyncssh.import_private_key(pem)],
                process_factory=handler(host),
                encoding=None,
                gss_kex=False,
                gss_auth=False,
                password_auth=False,
                kbdint_auth=False,
                allow_pty=False,
                agent_forwarding=False,
                x11_forwarding=False,
                reuse_address=True,
            )
        )
    asked = 0

    def write_counts() -> None:  # on SIGUSR1: the replies so far, and how many times asked
        nonlocal asked
        asked += 1
        counts.with_suffix(".tmp").write_text(json.dumps({"asked": asked, **answers.counts}))
        counts.with_suffix(".tmp").replace(counts)

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, write_counts)
    print(f"ready {len(servers)}", flush=True)
    parent = os.getppid()
    while time.monotonic() < deadline and os.getppid() == parent:  # the deadline, or the bench gone
        await asyncio.sleep(1)
    for server in servers:
        server.close()


def serve_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description="one simulated-node server process (started by SimCluster)")
    parser.add_argument("--hosts", type=Path, required=True)
    parser.add_argument("--first", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--seconds", type=float, required=True, help="stop after this long, whatever happens")
    parser.add_argument("--client-key", required=True, help="the one public key accepted, for user mpi")
    parser.add_argument("--probe-captures", type=Path, default=PROBE_CAPTURES)
    parser.add_argument("--round-trips", type=Path, default=ROUND_TRIPS)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.seconds
    signal.signal(signal.SIGALRM, lambda *_: os._exit(3))  # a hard stop even if the loop is stuck
    signal.alarm(int(args.seconds) + 30)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a listener per host plus the connections
    hosts = read_hosts(args.hosts)[args.first : args.first + args.count]
    counts = args.hosts.parent / f"counts-{args.first}.json"
    asyncio.run(_serve(hosts, Answers(args.probe_captures, args.round_trips), args.client_key, args.port, deadline, counts))


class SimCluster:
    """``count`` simulated nodes in ``ceil(count / HOSTS_PER_PROCESS)`` server processes, stopped
    on leaving the ``with`` block (or by themselves after ``seconds``). ``key`` is the client's
    private key file (made here), ``hosts`` the nodes."""

    def __init__(
        self,
        work: Path,
        count: int,
        seconds: float,
        probe_captures: Path = PROBE_CAPTURES,
        round_trips: Path = ROUND_TRIPS,
        port: int = PORT,
    ):
        self.work, self.count, self.seconds, self.port = work, count, seconds, port
        self.probe_captures, self.round_trips = probe_captures, round_trips
        self.processes: list[subprocess.Popen] = []
        self.key = work / "id_ed25519"
        self.hosts: list[SimHost] = []
        self.startup_seconds = 0.0
        self.asked = 0  # times replies() asked the processes for their counts

    def __enter__(self) -> SimCluster:
        started = time.monotonic()
        self.hosts = make_hosts(self.count)
        write_hosts(self.hosts, self.work / "sim-hosts.txt")
        client = _write_client_key(self.key)
        try:
            for first in range(0, self.count, HOSTS_PER_PROCESS):
                self.processes.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            __file__,
                            "--serve",
                            "--hosts",
                            str(self.work / "sim-hosts.txt"),
                            "--first",
                            str(first),
                            "--count",
                            str(min(HOSTS_PER_PROCESS, self.count - first)),
                            "--port",
                            str(self.port),
                            "--seconds",
                            str(self.seconds),
                            "--client-key",
                            client,
                            "--probe-captures",
                            str(self.probe_captures),
                            "--round-trips",
                            str(self.round_trips),
                        ],
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                )
            for process in self.processes:
                line = process.stdout.readline()
                if not line.startswith("ready"):
                    raise RuntimeError(f"a simulated-node server did not start (exit {process.poll()})")
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def replies(self) -> Counter[str]:
        """The replies every server process has given so far, by kind (see :meth:`Answers.reply`)."""
        self.asked += 1
        for process in self.processes:
            process.send_signal(signal.SIGUSR1)
        total: Counter[str] = Counter()
        for first in range(0, self.count, HOSTS_PER_PROCESS):
            path = self.work / f"counts-{first}.json"
            for _ in range(500):  # the process writes them within a moment
                try:
                    counts = json.loads(path.read_text())
                    if counts.pop("asked") == self.asked:
                        break
                except (OSError, ValueError, KeyError):
                    pass
                time.sleep(0.02)
            else:
                raise RuntimeError(f"a simulated-node server did not report its counts ({path})")
            total.update(counts)
        return total

    def server_cpu(self) -> float:
        """CPU seconds (user+sys) the server processes have used so far (read from /proc)."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for process in self.processes:
            try:
                fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        return total

    def write_inventory(self, path: Path, count: int | None = None, users: list[dict] | None = None) -> None:
        """An inventory of the first ``count`` nodes (all by default): name, address, port, the
        client key; ``users``: its cluster_users."""
        hosts = self.hosts[: count or self.count]
        lines = ["defaults:", f"  user: {USER}", f"  key: {self.key}", f"  port: {self.port}", "hosts:"]
        lines += [f"  {h.name}: {{address: {h.address}}}" for h in hosts]
        if users:
            lines += ["vars:", f"  cluster_users: {json.dumps(users)}"]
        path.write_text("\n".join(lines) + "\n")

    def write_known_hosts(self, path: Path, count: int | None = None) -> None:
        """Every node's host key as ``[ADDRESS]:PORT type blob`` (what ssh-keyscan would give)."""
        path.write_text("".join(f"[{h.address}]:{self.port} {h.public}\n" for h in self.hosts[: count or self.count]))


def _write_client_key(path: Path) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve_main(sys.argv[2:])
    else:
        sys.exit("started by bench/scale_4096.py (SimCluster); see this module's docstring")
