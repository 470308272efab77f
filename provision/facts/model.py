"""Typed facts about one host, as plain dataclasses that round-trip through JSON.

:func:`from_json` rebuilds any of them from its JSON form by the declared field types, so a field
added to a dataclass here is stored and read back with no other code:

    >>> from_json(Gpu, {"index": 0, "name": "V100", "bus_id": "0000:04:00.0", "memory_mib": 16160,
    ...                 "numa_node": 0, "socket": 0, "affinity_source": "nvidia-smi-topo"}).bus_id
    '0000:04:00.0'
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import asdict, dataclass, field
from typing import Any

from provision.text import shown_value

FACTS_FORMAT = 1


@dataclass(frozen=True)
class Core:
    """A usable physical core (at least one online hardware thread)."""

    index: int  # number relative to its socket, as rank files use it (slot=S:index)
    core_id: int  # the id the source gave (ppc64_cpu "Core N", lscpu CORE, sysfs core_id)
    cpus: tuple[int, ...]  # online logical CPUs (thread slots) of this core


@dataclass(frozen=True)
class Socket:
    """A physical package that has usable cores."""

    index: int  # 0-based order, as rank files number sockets
    physical_id: int  # package id (x86) or the NUMA node id of the chip (POWER)
    numa_nodes: tuple[int, ...]  # NUMA nodes holding this socket's CPUs
    cores: tuple[Core, ...]


@dataclass(frozen=True)
class CpuTopology:
    """Sockets, cores relative to each socket, hardware threads."""

    sockets: tuple[Socket, ...]
    threads_per_core: int  # online threads of the fullest core (the SMT mode in effect)
    source: str  # which capture(s) the topology came from
    offline_cores: int = 0  # cores with no online thread: not usable, not counted

    @property
    def socket_count(self) -> int:
        """Number of sockets with usable cores."""
        return len(self.sockets)

    @property
    def cores_per_socket(self) -> int | None:
        """Usable cores per socket, or None when sockets differ."""
        counts = {len(socket.cores) for socket in self.sockets}
        return counts.pop() if len(counts) == 1 else None

    @property
    def total_cpus(self) -> int:
        """Online logical CPUs over all sockets."""
        return sum(len(core.cpus) for socket in self.sockets for core in socket.cores)

    def shape(self) -> str:
        """``sockets x cores x threads``, e.g. ``2x10x8``; uneven sockets show each count."""
        per_socket = self.cores_per_socket
        cores = str(per_socket) if per_socket is not None else "/".join(str(len(s.cores)) for s in self.sockets)
        return f"{self.socket_count}x{cores}x{self.threads_per_core}"

    def socket_of_cpu(self, cpu: int) -> int | None:
        """Socket index that holds logical CPU ``cpu``, or None."""
        for socket in self.sockets:
            for core in socket.cores:
                if cpu in core.cpus:
                    return socket.index
        return None

    def socket_of_numa_node(self, node: int) -> int | None:
        """Socket index whose CPUs live on NUMA node ``node``, or None (e.g. a GPU memory node)."""
        for socket in self.sockets:
            if node in socket.numa_nodes:
                return socket.index
        return None


@dataclass(frozen=True)
class Gpu:
    """One GPU and the socket it hangs off."""

    index: int
    name: str
    bus_id: str  # normalised PCI address, dddd:bb:dd.f
    memory_mib: int | None
    numa_node: int | None
    socket: int | None  # socket index (as in CpuTopology), None when affinity is unknown
    affinity_source: str | None  # nvidia-smi-topo, sysfs-gpu, or None


@dataclass(frozen=True)
class OpenMPI:
    """Installed OpenMPI."""

    version: str | None  # e.g. "4.1.4"; None when not installed
    packages: tuple[str, ...]  # installed package names carrying OpenMPI
    cuda_aware: bool | None  # None when nothing tells
    source: str  # ompi_info, dpkg-query, dpkg -l, rpm, or none

    @property
    def major(self) -> int | None:
        """Major version number, or None."""
        if not self.version:
            return None
        head = self.version.split(".", 1)[0]
        return int(head) if re.fullmatch(r"[0-9]{1,9}", head) else None


NO_OPENMPI = OpenMPI(None, (), None, "none")  # nothing installed


@dataclass(frozen=True)
class NetInterface:
    """A network interface with its addresses, and (from sysfs) what is behind it."""

    name: str
    up: bool
    addresses: tuple[str, ...]  # CIDR notation, IPv4 and IPv6
    mtu: int | None = None
    speed_mbps: int | None = None  # None: unknown (virtual, or link down)
    pci_address: str | None = None  # the PCI device behind it, dddd:bb:dd.f; None for virtual ones
    numa_node: int | None = None

    def ipv4(self) -> tuple[str, ...]:
        """Its IPv4 addresses, CIDR notation."""
        return tuple(a for a in self.addresses if "." in a and ":" not in a)


@dataclass(frozen=True)
class RdmaGid:
    """One non-zero entry of an RDMA port's GID table."""

    index: int
    gid: str  # 8 groups of 4 hex digits, as sysfs prints it
    type: str | None  # "IB/RoCE v1" or "RoCE v2"; None where the kernel has no gid_attrs
    netdev: str | None  # the network interface it belongs to (RoCE), None on InfiniBand

    @property
    def ipv4_mapped(self) -> bool:
        """True for ``::ffff:a.b.c.d`` GIDs (a RoCE GID made from an IPv4 address)."""
        return self.gid.lower().startswith("0000:0000:0000:0000:0000:ffff:")


@dataclass(frozen=True)
class RdmaPort:
    """One port of an RDMA device (``/sys/class/infiniband/DEV/ports/N``)."""

    number: int
    state: str  # ACTIVE, DOWN, INIT, ARMED, ACTIVE_DEFER (the word after "4: ")
    phys_state: str | None  # LinkUp, Disabled, Polling...
    link_layer: str | None  # InfiniBand or Ethernet (RoCE)
    rate: str | None  # e.g. "100 Gb/sec (4X EDR)"
    gids: tuple[RdmaGid, ...] = ()

    @property
    def active(self) -> bool:
        """True when the port can carry traffic."""
        return self.state == "ACTIVE"

    @property
    def roce(self) -> bool:
        """True for an Ethernet (RoCE) port."""
        return self.link_layer == "Ethernet"

    def netdev(self) -> str | None:
        """The interface the port's default GID (index 0) belongs to, else the first GID's."""
        named = [gid for gid in self.gids if gid.netdev]
        first = next((gid for gid in named if gid.index == 0), named[0] if named else None)
        return first.netdev if first else None


@dataclass(frozen=True)
class RdmaDevice:
    """An RDMA device (HCA), its PCI device and NUMA node, its ports."""

    name: str  # mlx5_0
    pci_address: str | None
    numa_node: int | None
    ports: tuple[RdmaPort, ...]


@dataclass(frozen=True)
class GpuNicLink:
    """How far a GPU is from an RDMA device, in NVIDIA's classes (see :data:`DISTANCES`)."""

    gpu: int  # GPU index
    device: str  # RDMA device name
    distance: str  # PIX, PXB, PHB, NODE or SYS
    source: str  # hwloc-xml, nvidia-smi-topo or sysfs NUMA (sysfs-rdma)


# Nearest first: one PCIe bridge (switch), several bridges, the host bridge, within the NUMA
# node across host bridges, across the SMP interconnect (nvidia-smi topo -m's legend).
DISTANCES = ("PIX", "PXB", "PHB", "NODE", "SYS")


@dataclass
class HostFacts:
    """Everything provision knows about one host."""

    host: str  # inventory name
    hostname: str  # what the host calls itself (rank files must use names mpirun resolves)
    arch: str
    cpu: CpuTopology
    gpus: tuple[Gpu, ...] = ()
    memory_mib: int | None = None
    openmpi: OpenMPI = NO_OPENMPI
    interfaces: tuple[NetInterface, ...] = ()
    rdma: tuple[RdmaDevice, ...] = ()
    gpu_nics: tuple[GpuNicLink, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)  # fact -> capture it came from
    notes: tuple[str, ...] = ()  # disagreements between sources, fallbacks used
    unavailable: dict[str, str] = field(default_factory=dict)  # capture -> why it is missing
    probed_at: str = ""
    kept: dict[str, Any] = field(default_factory=dict)  # fact name -> its parsed value (facts declared with a column)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples become lists)."""
        data = asdict(self)
        data["format"] = FACTS_FORMAT
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostFacts:
        """Rebuild facts from :meth:`to_dict` output (each field by its declared type, see
        :func:`from_json`); raises KeyError/TypeError/ValueError on bad data."""
        if data.get("format") != FACTS_FORMAT:
            raise ValueError(f"unknown facts format {shown_value(data.get('format'))} (expected {FACTS_FORMAT})")
        return from_json(cls, {key: value for key, value in data.items() if key != "format"})

    def mtu(self, interface: str) -> int | None:
        """The MTU of ``interface`` (from sysfs-net), None when unknown or no such interface."""
        return next((i.mtu for i in self.interfaces if i.name == interface), None)

    def rdma_ports(self) -> tuple[tuple[str, RdmaPort], ...]:
        """``(("mlx5_0/1", port), ...)``: every port of every RDMA device, named ``device/port``."""
        return tuple((f"{device.name}/{port.number}", port) for device in self.rdma for port in device.ports)

    def signature(self) -> tuple:
        """What must match across hosts for one training job: arch, shape, GPU count and model."""
        gpu_models = tuple(sorted({gpu.name for gpu in self.gpus}))
        return (self.arch, self.cpu.shape(), len(self.gpus), gpu_models)


_PLAIN = (str, int, float, bool)


def from_json(kind: Any, value: Any, where: str = "facts") -> Any:
    """``value`` (parsed JSON) as ``kind``: a dataclass from an object of its fields (a field left
    out takes its default; an unknown key is refused), ``tuple[X, ...]`` from a list, ``dict[str, X]``,
    ``X | None``, the plain types (a bool is no int here), ``Any`` as it is. TypeError/ValueError
    naming ``where`` on anything else."""
    if kind is Any:
        return value
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise TypeError(f"{where}: expected an object for {kind.__name__}")
        hints = typing.get_type_hints(kind)
        fields = {f.name: f for f in dataclasses.fields(kind) if f.init}
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise TypeError(f"{where}: unknown field {shown_value(unknown[0])} in {kind.__name__}")
        return kind(**{name: from_json(hints[name], item, f"{where}.{name}") for name, item in value.items()})
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return from_json(options[0], value, where)
        raise TypeError(f"{where}: cannot choose among {kind}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):  # a list from JSON, a tuple from to_dict itself
            raise TypeError(f"{where}: expected a list")
        return tuple(from_json(args[0], item, f"{where}[{index}]") for index, item in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise TypeError(f"{where}: expected an object")
        return {from_json(args[0], key, where): from_json(args[1], item, f"{where}.{key}") for key, item in value.items()}
    if kind in _PLAIN:
        if isinstance(value, kind) and not (kind is not bool and isinstance(value, bool)):
            return value
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        raise TypeError(f"{where}: expected {kind.__name__}, got {type(value).__name__}")
    raise TypeError(f"{where}: no JSON form for {kind}")
