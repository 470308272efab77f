"""What doctor knows about each node, and what each check concludes (frozen dataclasses)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from provision.facts.model import HostFacts

PASS, WARN, FAIL = "pass", "warn", "fail"
SEVERITY = {PASS: 0, WARN: 1, FAIL: 2}


@dataclass(frozen=True)
class LinkFinding:
    """A link a check holds at fault: a bad link (both nodes fine with their other peers), a slow
    link it cannot put on a node or a link, or a test that failed. ``a`` ran the client, ``b`` the
    server; the figures are Gbit/s, ``gbps`` the slower direction (None: not measured)."""

    a: str
    b: str
    verdict: str  # "bad link", "slow link" or "test failed"
    why: str
    gbps: float | None = None
    forward_gbps: float | None = None  # a -> b
    reverse_gbps: float | None = None  # b -> a

    def to_dict(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "verdict": self.verdict,
            "why": self.why,
            "gbps": self.gbps,
            "forward_gbps": self.forward_gbps,
            "reverse_gbps": self.reverse_gbps,
        }


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome: status, the hosts at fault, one line a person can act on; and the same
    as fields a program reads: what is wrong on each node (``nodes``, in the check's words), the
    links at fault, the thresholds it judged by and what it covered (``--json``)."""

    name: str
    status: str  # pass, warn or fail
    hosts: tuple[str, ...] = ()
    detail: str = ""
    nodes: Mapping[str, str] = field(default_factory=dict)  # host -> what is wrong there (a node at fault)
    node_status: Mapping[str, str] = field(default_factory=dict)  # host -> its own status, where milder than ``status``
    links: tuple[LinkFinding, ...] = ()
    thresholds: Mapping[str, float] = field(default_factory=dict)
    coverage: Mapping[str, Any] | None = None

    def status_of(self, host: str) -> str:
        """The status ``host`` earns in this check (a node that only warns in a failing check warns)."""
        return self.node_status.get(host, self.status)

    def bad_nodes(self) -> dict[str, str | None]:
        """host -> what is wrong there (None where the check says it only in ``detail``): every
        host it names but the ends of a link it holds at fault, which are no bad node for that."""
        ends = {end for link in self.links for end in (link.a, link.b)}
        found: dict[str, str | None] = dict(self.nodes)
        for host in self.hosts:
            if host not in found and host not in ends:
                found[host] = None
        return found

    def to_dict(self) -> dict:
        """The ``--json`` form (docs/reference/doctor-json.md): name, status, hosts, detail, and
        bad_nodes, bad_links, thresholds, coverage as fields."""
        return {
            "name": self.name,
            "status": self.status,
            "hosts": list(self.hosts),
            "detail": self.detail,
            "bad_nodes": [{"host": host, "status": self.status_of(host), "why": why} for host, why in self.bad_nodes().items()],
            "bad_links": [link.to_dict() for link in self.links],
            "thresholds": dict(self.thresholds),
            "coverage": dict(self.coverage) if self.coverage is not None else None,
        }


@dataclass(frozen=True)
class Limits:
    """Resource limits as a non-interactive SSH session of the job user sees them."""

    memlock_kib: int | None  # None: unlimited
    nofile: int | None  # None: unlimited


@dataclass(frozen=True)
class Software:
    """Versions that must match across nodes ("" when absent)."""

    nvidia_driver: str = ""
    cuda_runtime: str = ""
    nccl: str = ""
    conda_python: str = ""  # "PREFIX python X.Y.Z"


@dataclass(frozen=True)
class Mount:
    """The mount that holds a path on a node (from /proc/self/mountinfo): where, what file system, from what source."""

    point: str
    fstype: str
    source: str


@dataclass(frozen=True)
class Manifest:
    """A dataset folder's summary: file count, total bytes, hash of names+sizes+mtimes (and sample contents)."""

    path: str
    exists: bool
    files: int = 0
    size: int = 0
    listing_hash: str = ""
    content_hash: str = ""  # --deep only
    mount: Mount | None = None  # what holds the path there (None: not read)


@dataclass(frozen=True)
class GpuHealth:
    """One GPU's health from ``nvidia-smi -q -x``."""

    bus_id: str
    persistence: bool | None
    volatile_uncorrected: int | None
    retired_pending: bool
    remapped_pending: bool


@dataclass(frozen=True)
class NodeReport:
    """Everything doctor learnt from one node; ``error`` set when it could not be reached or read."""

    host: str
    error: str = ""
    facts: HostFacts | None = None
    login_user: str = ""
    login_uid: int | None = None
    job_user: str = ""  # as asked (--user); "" means the login user
    job_ids: tuple[int, int] | None = None  # (uid, gid) of the job user; None: no such user
    own_limits: Limits | None = None  # limits of the gather session (the job user's when login_user is it)
    shm_kib: int | None = None
    software: Software = field(default_factory=Software)
    datasets: tuple[Manifest, ...] = ()
    gpu_health: tuple[GpuHealth, ...] | None = None  # None: no nvidia-smi
    pci_gpus: int = 0
    xids: tuple[str, ...] | None = None  # None: kernel log not readable
    clock_offset: float | None = None  # seconds, node minus controller
    clock_error: float | None = None  # +- seconds (half the unexplained round trip)
    pairwise: dict[str, str] = field(default_factory=dict)  # peer -> "" (ok) or why it failed
    peer_limits: dict[str, Limits] = field(default_factory=dict)  # peer -> limits its sshd gave the job user
    resolved: dict[str, str] = field(default_factory=dict)  # name -> address this node resolves it to

    @property
    def login_job(self) -> bool:
        """True when we logged in as the job user (our session's limits are then its own)."""
        return not self.job_user or self.job_user == self.login_user

    @property
    def ok(self) -> bool:
        """True when the node answered and its facts were read."""
        return not self.error
