"""Derive a host's facts from its raw captures: pure, text in, :class:`HostFacts` out.

Which source wins, and why:
- POWER (``ppc64_cpu --info`` present): cores and online threads from ppc64_cpu, sockets from the
  NUMA nodes that hold CPUs in ``numactl -H`` (as the DDL README reads them). Memory-only nodes
  (POWER9 GPU memory) are not sockets.
- Elsewhere: ``lscpu -p`` (SOCKET column), else the sysfs capture. Sockets never come from the
  NUMA node count: Sub-NUMA Clustering and EPYC NPS4 put several nodes in one socket.
- hwloc's XML, when captured, comes before all of these: OpenMPI reads ``slot=S:C`` through hwloc
  (logical package S, logical core C inside it); the others are only cross-checked.
A fact declared with a ``column`` (:mod:`provision.facts.registry`) needs nothing of this module:
its parsed value is kept as it is (:func:`kept_values`).

Every disagreement between sources becomes a note in the facts, and so does a source that cannot
be read where another answers the same question (``numactl -H``, ``lscpu -p``, ``lscpu``,
``nvidia-smi topo -m``, sysfs): the host is still probed from the others. Only an unreadable source
that nothing else replaces (``ppc64_cpu``/``numactl`` on POWER, the only core topology, the GPU
list, ``/proc/meminfo``) fails the host, naming that source.
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache
from typing import Any

from provision.errors import NotCapturedError, ParseError
from provision.facts import hwloc, lscpu, nic_distance, nics, numactl, nvidia, openmpi, ppc64_cpu, sysfs_cpu, system
from provision.facts.model import NO_OPENMPI, Core, CpuTopology, Gpu, HostFacts, RdmaDevice, Socket
from provision.facts.registry import kept_facts

POWER_ARCHES = ("ppc64le", "ppc64")

# Capture names, from the sources declared beside each parser.
HOSTNAME, UNAME_M, MEMINFO, IP_ADDR, IP_LINK = (
    system.HOSTNAME.name,
    system.UNAME_M.name,
    system.MEMINFO.name,
    system.IP_ADDR.name,
    system.IP_LINK.name,
)
NUMA, PPC64, OPENMPI = numactl.SOURCE.name, ppc64_cpu.SOURCE.name, openmpi.SOURCE.name
LSCPU, LSCPU_P, SYSFS_CPU, HWLOC = lscpu.SOURCE.name, lscpu.SOURCE_P.name, sysfs_cpu.SOURCE.name, hwloc.SOURCE.name
GPU_QUERY, GPU_TOPO, GPU_SYSFS = nvidia.SOURCE_QUERY.name, nvidia.SOURCE_TOPO.name, nvidia.SOURCE_SYSFS.name
SYSFS_RDMA, SYSFS_NET = nics.RDMA_SOURCE.name, nics.NET_SOURCE.name
POWER_SOURCE = f"{PPC64}+{NUMA}"


def _read(name: str, parse, captures: dict[str, str], notes: list[str], failed: dict[str, ParseError]):
    """``parse(captures[name])``; None when not captured, or when unreadable: then a note says why
    and ``failed`` keeps the error, for the caller to raise if no other source answers."""
    if name not in captures:
        return None
    try:
        return parse(captures[name])
    except ParseError as error:
        failed[name] = error
        notes.append(f"{name} not used: {error}")
        return None


def _topology_from_power(cores: tuple[ppc64_cpu.PowerCore, ...], numa: numactl.NumaHardware) -> CpuTopology:
    node_of_cpu = numa.node_of_cpu()
    by_node: dict[int, list[ppc64_cpu.PowerCore]] = defaultdict(list)
    offline = 0
    for core in cores:
        if not core.online:
            offline += 1  # no online thread: the core cannot be bound to
            continue
        nodes = {node_of_cpu.get(cpu) for cpu in core.online}
        if None in nodes:
            missing = [cpu for cpu in core.online if cpu not in node_of_cpu]
            raise ParseError(PPC64, f"core {core.core_id}: online CPU(s) {missing} absent from numactl -H")
        if len(nodes) > 1:
            raise ParseError(PPC64, f"core {core.core_id} spans NUMA nodes {sorted(nodes)}")
        by_node[nodes.pop()].append(core)
    if not by_node:
        raise ParseError(PPC64, f"none of the {len(cores)} core(s) has an online thread: no usable CPU")
    sockets = tuple(
        Socket(
            index=index,
            physical_id=node_id,
            numa_nodes=(node_id,),
            cores=tuple(
                Core(position, core.core_id, core.online)
                for position, core in enumerate(sorted(by_node[node_id], key=lambda c: c.core_id))
            ),
        )
        for index, node_id in enumerate(sorted(by_node))
    )
    threads = max(len(core.cpus) for socket in sockets for core in socket.cores)
    return CpuTopology(sockets, threads, POWER_SOURCE, offline)


def _topology_from_rows(rows: tuple[lscpu.CpuRow, ...], source: str, numa: numactl.NumaHardware | None) -> CpuTopology:
    node_of_cpu = numa.node_of_cpu() if numa else {}
    # (socket, core) identifies a core: sysfs core_id restarts in every package.
    cpus_of_core: dict[tuple[int, int], list[int]] = defaultdict(list)
    nodes_of_socket: dict[int, set[int]] = defaultdict(set)
    for row in rows:
        cpus_of_core[(row.socket, row.core)].append(row.cpu)
        node = row.node if row.node is not None else node_of_cpu.get(row.cpu)
        if node is not None:
            nodes_of_socket[row.socket].add(node)
    socket_ids = sorted({socket for socket, _ in cpus_of_core})
    sockets = []
    for index, socket_id in enumerate(socket_ids):
        core_keys = sorted(key for key in cpus_of_core if key[0] == socket_id)
        sockets.append(
            Socket(
                index=index,
                physical_id=socket_id,
                numa_nodes=tuple(sorted(nodes_of_socket[socket_id])),
                cores=tuple(Core(position, key[1], tuple(sorted(cpus_of_core[key]))) for position, key in enumerate(core_keys)),
            )
        )
    threads = max(len(cpus) for cpus in cpus_of_core.values())
    return CpuTopology(tuple(sockets), threads, source, 0)


def _rows_checked_by_sysfs(
    rows: tuple[lscpu.CpuRow, ...], captures: dict[str, str], notes: list[str]
) -> tuple[tuple[lscpu.CpuRow, ...], str]:
    """``lscpu -p`` rows, unless sysfs's sibling lists group the CPUs differently (hybrid CPUs).

    lscpu numbers CORE and SOCKET separately for each CPU type, so on big.LITTLE chips CPUs of
    different cores share a (socket, core) pair; the kernel's sibling lists say which really do.
    """
    if SYSFS_CPU not in captures:
        return rows, LSCPU_P
    try:
        sysfs = sysfs_cpu.parse_sysfs_cpu(captures[SYSFS_CPU])
    except ParseError as error:
        notes.append(f"sysfs-cpu not used to check lscpu-p: {error}")
        return rows, LSCPU_P
    if not sysfs.siblings or sysfs_cpu.same_grouping(rows, sysfs.rows):
        return rows, LSCPU_P
    notes.append(
        "lscpu-p groups CPUs into cores or sockets differently from the kernel's sibling lists "
        "(lscpu numbers cores per CPU type on hybrid CPUs); used sysfs-cpu"
    )
    return sysfs.rows, SYSFS_CPU


@lru_cache(maxsize=16)
def _parsed_hwloc(text: str) -> hwloc.HwlocTopology:
    """The host's hwloc XML parsed once, for its cores and for its GPUs (the largest capture,
    parsed twice per host before: issue 28). The result is frozen, safe to share."""
    return hwloc.parse_hwloc_xml(text)


def _topology_from_hwloc(captures: dict[str, str], notes: list[str]) -> CpuTopology | None:
    """hwloc's topology when its XML was captured and readable, else None (with a note why)."""
    if HWLOC not in captures:
        return None
    try:
        parsed = _parsed_hwloc(captures[HWLOC])
    except ParseError as error:
        notes.append(f"hwloc-xml not used: {error}")
        return None
    if parsed.cpu_kinds > 1:
        notes.append(f"hybrid CPU: hwloc-xml lists {parsed.cpu_kinds} kinds of cores; cores differ in speed and threads")
    return hwloc.cpu_topology(parsed)


def _prefer_hwloc(from_hwloc: CpuTopology, other: CpuTopology, notes: list[str]) -> CpuTopology:
    """hwloc's topology, with a note where the other sources number sockets or cores differently."""
    if other is from_hwloc:
        return from_hwloc
    if other.shape() != from_hwloc.shape():
        notes.append(
            f"{other.source} reads {other.shape()} but hwloc-xml reads {from_hwloc.shape()}; "
            "used hwloc-xml (OpenMPI numbers rank-file slots as hwloc does)"
        )
        return from_hwloc
    for mine, theirs in zip(from_hwloc.sockets, other.sockets, strict=False):
        for core, their_core in zip(mine.cores, theirs.cores, strict=False):
            if core.cpus != their_core.cpus:
                notes.append(
                    f"{other.source} numbers cores differently from hwloc-xml (socket {mine.index} core {core.index}: "
                    f"CPUs {list(their_core.cpus)} there, {list(core.cpus)} in hwloc); used hwloc-xml"
                )
                return from_hwloc
    return from_hwloc


def _cpu_topology(arch: str, captures: dict[str, str], notes: list[str]) -> CpuTopology:
    failed: dict[str, ParseError] = {}
    numa = _read(NUMA, numactl.parse_numactl_hardware, captures, notes, failed)
    rows = _read(LSCPU_P, lscpu.parse_lscpu_parsable, captures, notes, failed)
    row_source = LSCPU_P if rows is not None else None
    if rows is not None:
        rows, row_source = _rows_checked_by_sysfs(rows, captures, notes)
    elif SYSFS_CPU in captures:
        rows = _read(SYSFS_CPU, lambda text: sysfs_cpu.parse_sysfs_cpu(text).rows, captures, notes, failed)
        row_source = SYSFS_CPU if rows is not None else None

    from_hwloc = _topology_from_hwloc(captures, notes)
    topology = None
    if PPC64 in captures and (arch in POWER_ARCHES or rows is None):
        try:
            if numa is None:
                if NUMA in failed:
                    raise failed[NUMA]
                raise NotCapturedError(NUMA, "a POWER host with ppc64_cpu needs numactl -H to tell its sockets (install numactl)")
            topology = _topology_from_power(ppc64_cpu.parse_ppc64_cpu_info(captures[PPC64]), numa)
        except ParseError as error:
            if rows is None and from_hwloc is None:
                raise
            notes.append(f"{POWER_SOURCE} not used: {error}")
        if topology is not None and rows is not None:
            other = _topology_from_rows(rows, row_source, None)
            if other.shape() != topology.shape():
                notes.append(
                    f"{row_source} reads {other.shape()} but {POWER_SOURCE} reads {topology.shape()}; used {POWER_SOURCE} (POWER)"
                )
    if topology is None and rows is not None:
        topology = _topology_from_rows(rows, row_source, numa)
    if topology is None and from_hwloc is None:
        for name in (LSCPU_P, SYSFS_CPU):
            if name in failed:
                raise failed[name]
        raise NotCapturedError(LSCPU_P, "no core topology: none of lscpu -p, sysfs or ppc64_cpu --info was captured")
    if topology is None:
        topology = from_hwloc
    if from_hwloc is not None:
        topology = _prefer_hwloc(from_hwloc, topology, notes)

    if numa is not None:
        nodes_with_cpus, node_source = len(numa.nodes_with_cpus()), NUMA
        memory_only = len(numa.nodes) - nodes_with_cpus
        if memory_only:
            notes.append(f"numactl-H lists {memory_only} memory-only NUMA node(s) (e.g. GPU memory); not sockets")
    else:
        nodes_with_cpus = len({node for socket in topology.sockets for node in socket.numa_nodes})
        node_source = topology.source
    if nodes_with_cpus > topology.socket_count:
        notes.append(
            f"{node_source} shows {nodes_with_cpus} NUMA nodes with CPUs on {topology.socket_count} socket(s) "
            f"(sub-NUMA clustering or NPS); sockets from {topology.source}"
        )
    if topology.offline_cores:
        notes.append(f"{topology.offline_cores} core(s) have no online thread and are not usable")
    if len({len(s.cores) for s in topology.sockets}) > 1:
        notes.append(
            "sockets have different numbers of usable cores: "
            + ", ".join(f"socket {s.index}: {len(s.cores)}" for s in topology.sockets)
        )
    return topology


def _hwloc_gpus(captures: dict[str, str]) -> dict[str, hwloc.HwlocGpu]:
    """hwloc's NVIDIA GPUs by PCI bus id; empty when hwloc-xml is absent or unusable (noted already)."""
    if HWLOC not in captures:
        return {}
    try:
        return {gpu.bus_id: gpu for gpu in _parsed_hwloc(captures[HWLOC]).gpus}
    except ParseError:
        return {}


def _socket_from_topo(affinity: nvidia.GpuAffinity, topology: CpuTopology) -> tuple[int | None, int | None, str]:
    """(socket, NUMA node, why unknown) of one GPU from its ``nvidia-smi topo -m`` row; never a guess.

    The NUMA Affinity nodes that hold CPUs name the socket: on Grace the list also names the
    memory-only nodes of GPU memory (``0,3-9,11-17``: Grace node 0 and its GPUs' nodes), which are
    no socket. Failing that, the CPU Affinity names a socket only when all its CPUs sit on one (a
    VM with NUMA off says 0-79 for every GPU: that is no affinity at all).
    """
    why = "no affinity from nvidia-smi topo -m, hwloc or sysfs"
    cpu_nodes = [node for node in affinity.numa_nodes if topology.socket_of_numa_node(node) is not None]
    numa_node = cpu_nodes[0] if len(cpu_nodes) == 1 else affinity.numa_node
    sockets = {topology.socket_of_numa_node(node) for node in cpu_nodes}
    if len(sockets) == 1:
        return sockets.pop(), numa_node, why
    if affinity.cpus:
        sockets_of_cpus = {topology.socket_of_cpu(cpu) for cpu in affinity.cpus}
        if len(sockets_of_cpus) == 1 and None not in sockets_of_cpus:
            return sockets_of_cpus.pop(), numa_node, why
        spanned = sorted(str(s) for s in sockets_of_cpus if s is not None)
        why = (
            f"{GPU_TOPO} CPU Affinity spans sockets {','.join(spanned)}"
            if len(spanned) > 1
            else f"{GPU_TOPO} CPU Affinity names CPUs this host's topology lacks"
        )
    return None, numa_node, why


def _gpus(captures: dict[str, str], topology: CpuTopology, sources: dict[str, str], notes: list[str]) -> tuple[Gpu, ...]:
    local = _hwloc_gpus(captures)
    if GPU_QUERY not in captures:
        if local:
            notes.append(f"hwloc-xml shows {len(local)} NVIDIA GPU(s) but nvidia-smi is not available")
        return ()
    rows = nvidia.parse_gpu_query(captures[GPU_QUERY])  # the GPU list: no other source names the GPUs
    failed: dict[str, ParseError] = {}
    topo = {a.index: a for a in _read(GPU_TOPO, nvidia.parse_topo_matrix, captures, notes, failed) or ()}
    sysfs = _read(GPU_SYSFS, nvidia.parse_sysfs_gpu, captures, notes, failed) or {}
    gpus = []
    for row in rows:
        numa_node, socket, source = None, None, None
        why_unknown = "no affinity from nvidia-smi topo -m, hwloc or sysfs"
        affinity = topo.get(row.index)
        if affinity is not None:
            socket, numa_node, why_unknown = _socket_from_topo(affinity, topology)
            source = GPU_TOPO if socket is not None else None
        if socket is None and row.bus_id in local and local[row.bus_id].package is not None:  # one package holds it
            socket = topology.socket_of_cpu(local[row.bus_id].pus[0])
            numa_node = local[row.bus_id].numa_nodes[0] if len(local[row.bus_id].numa_nodes) == 1 else numa_node
            source = HWLOC if socket is not None else None
        if socket is None and sysfs.get(row.bus_id) is not None:
            numa_node = sysfs[row.bus_id]
            socket = topology.socket_of_numa_node(numa_node)
            source = GPU_SYSFS if socket is not None else None
        if socket is None:
            notes.append(f"GPU {row.index} ({row.bus_id}): socket affinity unknown ({why_unknown})")
        gpus.append(Gpu(row.index, row.name, row.bus_id, row.memory_mib, numa_node, socket, source))
    sources["gpus"] = GPU_QUERY
    return tuple(gpus)


def _network(
    captures: dict[str, str], interfaces: tuple, sources: dict[str, str], notes: list[str]
) -> tuple[tuple, tuple[RdmaDevice, ...]]:
    """Interfaces completed from sysfs-net, and the RDMA devices; an unreadable capture is a note."""
    rdma: tuple[RdmaDevice, ...] = ()
    try:
        if SYSFS_NET in captures:
            interfaces = nics.with_sysfs(interfaces, nics.parse_sysfs_net(captures[SYSFS_NET]))
        if SYSFS_RDMA in captures:
            rdma = nics.parse_sysfs_rdma(captures[SYSFS_RDMA])
            sources["rdma"] = SYSFS_RDMA
    except ParseError as error:
        notes.append(f"network facts incomplete: {error}")
    for device in rdma:
        for port in device.ports:
            if not port.active:
                notes.append(
                    f"RDMA {device.name} port {port.number} is {port.state}"
                    + (f" ({port.phys_state})" if port.phys_state else "")
                    + ": never chosen for a rank"
                )
    return interfaces, rdma


def kept_values(captures: dict[str, str], notes: list[str]) -> dict[str, Any]:
    """The value of each kept fact (declared with a ``column``) that was captured; one its parser
    refuses is left out, with a note why (no other source needs it)."""
    kept: dict[str, Any] = {}
    for fact in kept_facts():
        if fact.name in captures:
            try:
                kept[fact.name] = fact.read(captures[fact.name])
            except ParseError as error:
                notes.append(f"{fact.name} not used: {error}")
    return kept


def derive_facts(
    host: str, captures: dict[str, str], unavailable: dict[str, str] | None = None, probed_at: str = ""
) -> HostFacts:
    """Turn one host's captures ({capture name: stdout}) into :class:`HostFacts`.

    Missing captures are normal (no GPU, not POWER...). Raises :class:`ParseError`, naming the
    capture, when an output cannot be understood or no CPU topology can be had at all.
    """
    notes: list[str] = []
    sources: dict[str, str] = {}
    hostname = system.parse_hostname(captures[HOSTNAME]) if HOSTNAME in captures else host
    arch = system.parse_arch(captures[UNAME_M]) if UNAME_M in captures else "unknown"
    summary = _read(LSCPU, lscpu.parse_lscpu, captures, notes, {})
    if summary is not None:
        lscpu_arch = summary.get("Architecture")
        if arch == "unknown" and lscpu_arch:
            arch = lscpu_arch
        elif lscpu_arch and lscpu_arch != arch:
            notes.append(f"lscpu says architecture {lscpu_arch} but uname -m says {arch}; used uname -m")
    topology = _cpu_topology(arch, captures, notes)
    sources["cpu"] = topology.source
    memory = system.parse_meminfo(captures[MEMINFO]) if MEMINFO in captures else None
    if memory is not None:
        sources["memory"] = MEMINFO
    mpi = openmpi.parse_openmpi(captures[OPENMPI]) if OPENMPI in captures else NO_OPENMPI
    sources["openmpi"] = mpi.source
    interfaces = (
        system.parse_ip_addr(captures.get(IP_ADDR, ""), captures.get(IP_LINK, ""))
        if IP_ADDR in captures or IP_LINK in captures
        else ()
    )
    gpus = _gpus(captures, topology, sources, notes)
    interfaces, rdma = _network(captures, interfaces, sources, notes)
    gpu_nics = nic_distance.gpu_nic_links(gpus, rdma, captures.get(HWLOC), captures.get(GPU_TOPO), notes)
    kept = kept_values(captures, notes)
    return HostFacts(
        host=host,
        hostname=hostname,
        arch=arch,
        cpu=topology,
        gpus=gpus,
        memory_mib=memory,
        openmpi=mpi,
        interfaces=interfaces,
        rdma=rdma,
        gpu_nics=gpu_nics,
        sources=sources,
        notes=tuple(notes),
        unavailable=dict(unavailable or {}),
        probed_at=probed_at,
        kept=kept,
    )
