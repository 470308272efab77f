"""Parser for hwloc's XML export (``lstopo-no-graphics --of xml``): the topology OpenMPI binds by.

OpenMPI reads ``slot=S:C`` in a rank file through hwloc: S is the *logical* index of a Package, C
the logical index of a Core inside that package. The XML stores only OS indexes (``os_index``);
hwloc's logical index of an object is its rank among the objects of its type in a depth-first,
left-to-right walk of the tree (hwloc keeps siblings ordered by cpuset, and XML keeps that order),
so this parser numbers packages and cores exactly that way, from the tree, without reading cpusets.

Both formats are read: hwloc 1.x (no ``version`` attribute; ``NUMANode`` is an ordinary parent of
the CPUs local to it; ``Socket`` before 1.11) and 2.x/3.x (``version="2.0"``; NUMA nodes are memory
children, possibly under ``MemCache``, of the object whose CPUs are local to them).

The XML comes from a remote host and is treated as hostile: no DTD internal subset, entity
declaration or external entity is accepted (so no entity expansion can happen), and the size,
element count, nesting depth and PU count are bounded. Anything else raises :class:`ParseError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from xml.etree.ElementTree import Element, TreeBuilder
from xml.parsers import expat

from provision.errors import ParseError
from provision.facts.bounds import MAX_GPUS, MAX_NUMA_NODES, check_count
from provision.facts.model import Core, CpuTopology, Socket
from provision.facts.registry import Fact
from provision.text import shown_value

# hwloc's plugin files (lib/hwloc/hwloc_NAME.so) not loaded by the hwloc-xml step, see below.
PLUGINS_NOT_LOADED = (
    *("hwloc_gl", "hwloc_opencl", "hwloc_cuda", "hwloc_nvml", "hwloc_rsmi", "hwloc_levelzero"),
    *("hwloc_pci", "hwloc_xml_libxml"),
)
SOURCE = Fact(
    "hwloc-xml",
    (),
    # hwloc's view is what OpenMPI binds by. Its CPU and PCI discovery is enough: skip the x86
    # CPUID pass (it binds to every PU in turn) and the GL/OpenCL/CUDA/NVML/RSMI/Level Zero
    # plugins (driver start-up, seconds on GPU nodes); GPUs stay visible as PCI devices.
    # --no-caches (hwloc 1.11 to 3.x) halves the XML and changes no package or core numbering.
    # hwloc 2.x loads every plugin in its folder at start (a component left out is still loaded);
    # HWLOC_PLUGINS_BLACKLIST keeps those files closed: the GPU ones (libOpenCL, libcuda behind
    # them), pci (the linux component finds PCI devices itself, pci adds only vendor names, which
    # are not read here) and libxml (hwloc's own XML writer takes over). ~30% of the step (issue 37).
    # Neither command installed: "$l" fails with 127, "not installed".
    "if command -v lstopo-no-graphics >/dev/null 2>&1; then l=lstopo-no-graphics; else l=hwloc-ls; fi; "
    f"HWLOC_PLUGINS_BLACKLIST={','.join(PLUGINS_NOT_LOADED)} "
    'HWLOC_COMPONENTS=-x86,-gl,-opencl,-cuda,-nvml,-rsmi,-levelzero "$l" --no-caches --of xml',
    "hwloc's topology, as OpenMPI numbers sockets and cores (lstopo-no-graphics or hwloc-ls)",
)
MAX_CHARS = 16 * 1024 * 1024  # a 256-PU export is ~160 kB; a 4096-PU one with --whole-io a few MB
MAX_ELEMENTS = 250_000  # ~40 per core at most in real exports
MAX_DEPTH = 64  # real trees are under 20 deep
MAX_PUS = 65_536

_MEMORY = frozenset({"NUMANode", "MemCache"})
_IO = frozenset({"Bridge", "PCIDev", "OSDev", "Misc"})
_NVIDIA = "10de"
_GPU_CLASSES = frozenset({"0300", "0302"})  # VGA, 3D controller
_NVIDIA_OSDEV = re.compile(r"^(cuda|nvml)\d+\Z")
_PCI_TYPE = re.compile(r"^([0-9a-fA-F]{4}) \[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]")
_BUS_ID = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-9a-fA-F])\Z")


@dataclass(frozen=True)
class HwlocCore:
    """A Core object: hwloc's logical indexes (global and inside its package) and its PUs."""

    logical_index: int  # among all cores of the machine
    index: int  # among the cores of its package: the C of ``slot=S:C``
    os_index: int | None
    pus: tuple[int, ...]  # OS indexes of its PUs (Linux CPU numbers), ascending


@dataclass(frozen=True)
class HwlocPackage:
    """A Package (socket) object, its cores in logical order, the NUMA nodes holding its PUs."""

    logical_index: int  # the S of ``slot=S:C``
    os_index: int | None  # None when the OS gave none (physical_package_id -1)
    cores: tuple[HwlocCore, ...]
    numa_nodes: tuple[int, ...]


@dataclass(frozen=True)
class HwlocNumaNode:
    """A NUMA node and the PUs local to it (none for memory-only nodes such as GPU memory)."""

    os_index: int
    pus: tuple[int, ...]


@dataclass(frozen=True)
class HwlocGpu:
    """An NVIDIA GPU seen as a PCI device, with its locality (the nearest non-I/O ancestor)."""

    bus_id: str  # dddd:bb:dd.f, lower case
    device_id: str  # PCI device id, e.g. "15f9"
    names: tuple[str, ...]  # its OS devices, e.g. ("cuda0", "nvml0"), when hwloc's plugins ran
    pus: tuple[int, ...]  # PUs of the locality object
    numa_nodes: tuple[int, ...]  # NUMA nodes holding those PUs
    package: int | None  # logical index of the one package holding those PUs, else None


@dataclass(frozen=True)
class HwlocTopology:
    """What the parser reads from one export."""

    format_major: int  # 1 (hwloc 1.x) or 2, 3
    packages: tuple[HwlocPackage, ...]
    numa_nodes: tuple[HwlocNumaNode, ...]
    gpus: tuple[HwlocGpu, ...]
    cpu_kinds: int  # <cpukind> elements (hwloc >= 2.4): 2 or more on hybrid CPUs


class _Refused(Exception):
    """Raised inside expat handlers; becomes a ParseError."""


def _parse_tree(text: str) -> Element:
    """Well-formed, DTD-free, bounded XML -> an ElementTree element (text content is dropped)."""
    return parse_bounded_xml(text, SOURCE.name, keep_text=False)


def parse_bounded_xml(text: str, source: str, keep_text: bool = True) -> Element:
    """Well-formed, DTD-free, bounded XML from a node -> an ElementTree element; every refusal is
    a :class:`ParseError` naming ``source`` (also used for ``nvidia-smi -q -x``)."""
    if len(text) > MAX_CHARS:
        raise ParseError(source, f"output is {len(text)} characters, over the {MAX_CHARS} limit")
    builder = TreeBuilder()
    parser = expat.ParserCreate(encoding="utf-8")  # the data is already text: ignore the declared encoding
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    counts = {"elements": 0, "depth": 0}

    def start(tag: str, attributes: dict[str, str]) -> None:
        counts["elements"] += 1
        counts["depth"] += 1
        if counts["elements"] > MAX_ELEMENTS:
            raise _Refused(f"more than {MAX_ELEMENTS} elements")
        if counts["depth"] > MAX_DEPTH:
            raise _Refused(f"elements nested more than {MAX_DEPTH} deep")
        builder.start(tag, attributes)

    def end(tag: str) -> None:
        counts["depth"] -= 1
        builder.end(tag)

    def doctype(name: str, system_id: str | None, public_id: str | None, has_internal_subset: int) -> None:
        if has_internal_subset:
            raise _Refused("a DOCTYPE with an internal subset (entity or element declarations) is refused")

    def declaration(*_args: object) -> None:
        raise _Refused("entity declarations are refused")

    def external(*_args: object) -> int:
        raise _Refused("external entities are refused")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    if keep_text:
        parser.CharacterDataHandler = builder.data
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = declaration
    parser.UnparsedEntityDeclHandler = declaration
    parser.ExternalEntityRefHandler = external
    try:
        parser.Parse(text.encode("utf-8", "replace"), True)
    except _Refused as refused:
        raise ParseError(source, str(refused), parser.CurrentLineNumber) from None
    except expat.ExpatError as error:
        raise ParseError(source, f"not well-formed XML: {expat.errors.messages[error.code]}", error.lineno) from None
    return builder.close()


def _os_index(element: Element, what: str) -> int | None:
    value = element.get("os_index")
    if value is None:
        return None
    if not (value.isascii() and value.isdigit() and len(value) <= 10):
        raise ParseError(SOURCE.name, f"{what} has a bad os_index {shown_value(value[:20])}")
    return int(value)


@dataclass
class _Node:
    """One <object> during the walk: its type, parent, and the range of PUs under it."""

    type: str
    element: Element
    parent: int | None  # position in the node list
    pu_start: int = 0
    pu_end: int = 0


def _walk(root_object: Element) -> tuple[list[_Node], list[int]]:
    """Depth-first, document order: every object, and every PU's os_index in that order."""
    nodes: list[_Node] = []
    pus: list[int] = []
    # (element, parent position, entering?) - iterative, though depth is bounded anyway.
    stack: list[tuple[Element, int | None, int | None]] = [(root_object, None, None)]
    while stack:
        element, parent, closing = stack.pop()
        if closing is not None:
            nodes[closing].pu_end = len(pus)
            continue
        kind = element.get("type", "")
        kind = "Package" if kind == "Socket" else kind  # hwloc < 1.11
        position = len(nodes)
        nodes.append(_Node(kind, element, parent, len(pus)))
        if kind == "PU":
            index = _os_index(element, "a PU")
            if index is None:
                raise ParseError(SOURCE.name, "a PU has no os_index")
            pus.append(index)
            if len(pus) > MAX_PUS:
                raise ParseError(SOURCE.name, f"more than {MAX_PUS} PUs")
        stack.append((element, None, position))
        stack.extend((child, position, None) for child in reversed([c for c in element if c.tag == "object"]))
    return nodes, pus


def _ancestor(nodes: list[_Node], position: int, types: frozenset[str], inside: bool = True) -> int | None:
    """Nearest proper ancestor whose type is in ``types`` (``inside``) or not in ``types``."""
    current = nodes[position].parent
    while current is not None:
        if (nodes[current].type in types) == inside:
            return current
        current = nodes[current].parent
    return None


def _pci_gpu(node: _Node, children: list[_Node]) -> tuple[str, str, tuple[str, ...]] | None:
    """(bus id, device id, OS device names) when this PCIDev is an NVIDIA GPU, else None."""
    element = node.element
    names = tuple(child.element.get("name", "") for child in children if child.type == "OSDev")
    match = _PCI_TYPE.match(element.get("pci_type", ""))
    is_gpu = bool(match and match.group(1) in _GPU_CLASSES and match.group(2).lower() == _NVIDIA)
    if not is_gpu and not any(_NVIDIA_OSDEV.match(name) for name in names):
        return None
    bus = _BUS_ID.match(element.get("pci_busid", ""))
    if bus is None:
        raise ParseError(SOURCE.name, f"GPU with a bad pci_busid {shown_value(element.get('pci_busid', '')[:30])}")
    bus_id = f"{int(bus.group(1), 16):04x}:{bus.group(2)}:{bus.group(3)}.{bus.group(4)}".lower()
    return bus_id, (match.group(3).lower() if match else ""), tuple(n for n in names if n)


@SOURCE.parses
def parse_hwloc_xml(text: str) -> HwlocTopology:
    """Parse ``lstopo-no-graphics --of xml`` (hwloc 1.x or 2.x format) into packages, cores, NUMA nodes, GPUs.

    Raises :class:`ParseError` (source ``hwloc-xml``) on anything that is not a usable hwloc
    export: malformed or hostile XML, a PU outside any Core, a Core outside any Package.
    """
    root = _parse_tree(text)
    if root.tag != "topology":
        raise ParseError(SOURCE.name, f"the root element is <{root.tag[:30]}>, not <topology>")
    version = root.get("version")
    if version is None:
        major = 1
    else:
        head = version.split(".", 1)[0]
        if not (head.isascii() and head.isdigit() and len(head) <= 3):
            raise ParseError(SOURCE.name, f"unknown topology version {shown_value(version[:20])}")
        major = int(head)
    tops = [child for child in root if child.tag == "object"]
    if len(tops) != 1:
        raise ParseError(SOURCE.name, f"expected one root object, found {len(tops)}")
    nodes, pus = _walk(tops[0])
    if not pus:
        raise ParseError(SOURCE.name, "no PU objects")
    if len(set(pus)) != len(pus):
        raise ParseError(SOURCE.name, "a PU os_index appears twice")

    def pus_of(position: int) -> tuple[int, ...]:
        return tuple(sorted(pus[nodes[position].pu_start : nodes[position].pu_end]))

    # NUMA nodes: 1.x - the PUs below the node; 2.x - the PUs of the object it is attached to.
    numa: list[HwlocNumaNode] = []
    for position, node in enumerate(nodes):
        if node.type != "NUMANode":
            continue
        index = _os_index(node.element, "a NUMANode")
        if index is None:
            raise ParseError(SOURCE.name, "a NUMANode has no os_index")
        local = position if major == 1 else _ancestor(nodes, position, _MEMORY, inside=False)
        check_count(SOURCE.name, "NUMA nodes", len(numa) + 1, MAX_NUMA_NODES)
        numa.append(HwlocNumaNode(index, pus_of(local) if local is not None else ()))

    # Every PU must sit in a Core, every Core in a Package: that is what slot=S:C names.
    for position, node in enumerate(nodes):
        if node.type == "PU" and _ancestor(nodes, position, frozenset({"Core"})) is None:
            raise ParseError(SOURCE.name, f"PU {pus[node.pu_start]} is not inside a Core")
    package_positions = [p for p, node in enumerate(nodes) if node.type == "Package"]
    cores_of: dict[int, list[int]] = {p: [] for p in package_positions}
    core_positions = [p for p, node in enumerate(nodes) if node.type == "Core"]
    for position in core_positions:
        package = _ancestor(nodes, position, frozenset({"Package"}))
        if package is None:
            raise ParseError(SOURCE.name, f"Core {nodes[position].element.get('os_index', '?')[:10]} is not inside a Package")
        cores_of[package].append(position)
    logical_core = {position: number for number, position in enumerate(core_positions)}
    packages = []
    for logical, position in enumerate(package_positions):
        if not cores_of[position]:
            raise ParseError(SOURCE.name, f"Package L#{logical} has no Core")
        package_pus = set(pus_of(position))
        packages.append(
            HwlocPackage(
                logical_index=logical,
                os_index=_os_index(nodes[position].element, "a Package"),
                cores=tuple(
                    HwlocCore(logical_core[core], number, _os_index(nodes[core].element, "a Core"), pus_of(core))
                    for number, core in enumerate(cores_of[position])
                ),
                numa_nodes=tuple(sorted({n.os_index for n in numa if package_pus.intersection(n.pus)})),
            )
        )

    children: dict[int, list[_Node]] = {}
    for node in nodes:
        if node.parent is not None:
            children.setdefault(node.parent, []).append(node)
    gpus = []
    for position, node in enumerate(nodes):
        if node.type != "PCIDev":
            continue
        found = _pci_gpu(node, children.get(position, []))
        if found is None:
            continue
        check_count(SOURCE.name, "GPUs", len(gpus) + 1, MAX_GPUS)
        locality = _ancestor(nodes, position, _IO, inside=False)
        local = set(pus_of(locality)) if locality is not None else set()
        holding = [p.logical_index for p, at in zip(packages, package_positions, strict=False) if local & set(pus_of(at))]
        gpus.append(
            HwlocGpu(
                bus_id=found[0],
                device_id=found[1],
                names=found[2],
                pus=tuple(sorted(local)),
                numa_nodes=tuple(sorted({n.os_index for n in numa if local.intersection(n.pus)})),
                package=holding[0] if len(holding) == 1 else None,
            )
        )
    kinds = sum(1 for child in root if child.tag == "cpukind")
    return HwlocTopology(major, tuple(packages), tuple(numa), tuple(gpus), kinds)


def cpu_topology(topology: HwlocTopology) -> CpuTopology:
    """The rank-file view of an hwloc topology: sockets and cores in hwloc's logical order.

    Socket ``index`` is the package's logical index and Core ``index`` the core's logical index
    inside its package, as OpenMPI reads ``slot=S:C``; ``physical_id``/``core_id`` are the OS
    indexes (-1 where the OS gave none).
    """
    sockets = tuple(
        Socket(
            index=package.logical_index,
            physical_id=package.os_index if package.os_index is not None else -1,
            numa_nodes=package.numa_nodes,
            cores=tuple(Core(core.index, core.os_index if core.os_index is not None else -1, core.pus) for core in package.cores),
        )
        for package in topology.packages
    )
    threads = max(len(core.cpus) for socket in sockets for core in socket.cores)
    return CpuTopology(sockets, threads, SOURCE.name, 0)
