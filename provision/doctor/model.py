"""What doctor knows about each node, and what each check concludes (frozen dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass, field

from provision.facts.model import HostFacts

PASS, WARN, FAIL = "pass", "warn", "fail"
SEVERITY = {PASS: 0, WARN: 1, FAIL: 2}


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome: status, the hosts at fault, one line a person can act on."""

    name: str
    status: str  # pass, warn or fail
    hosts: tuple[str, ...] = ()
    detail: str = ""

    def to_dict(self) -> dict:
        """The ``--json`` form: ``{"name", "status", "hosts", "detail"}``."""
        return {"name": self.name, "status": self.status, "hosts": list(self.hosts), "detail": self.detail}


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
class IbPort:
    """An InfiniBand/RoCE port from sysfs."""

    name: str  # device/port, e.g. mlx5_0/1
    state: str  # ACTIVE, DOWN, INIT...
    link_layer: str  # InfiniBand or Ethernet


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
    mtus: dict[str, int] = field(default_factory=dict)
    ib_ports: tuple[IbPort, ...] = ()
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
