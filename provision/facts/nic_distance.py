"""How far each GPU is from each RDMA device, in nvidia-smi's classes (PIX, PXB, PHB, NODE, SYS).

Three sources, best first:

1. hwloc's XML (the ``hwloc-xml`` capture): the PCI tree itself. Walk up from the GPU's PCI
   device and the NIC's (the PCI device with an OpenFabrics OS device of that name) to their
   lowest common ancestor. Under the same PCI bridge or switch, each at most one bridge below it:
   PIX; more bridges: PXB; the common ancestor is the host bridge: PHB; different host bridges of
   one NUMA node: NODE; different NUMA nodes: SYS. (NVIDIA's and NCCL's definitions, in which a
   PCIe switch's upstream and downstream ports count as one bridge.)
2. ``nvidia-smi topo -m``'s matrix (:mod:`provision.facts.topo_matrix`).
3. sysfs NUMA nodes (``sysfs-gpu`` and ``sysfs-rdma``): same node NODE, other node SYS; nothing
   finer can be told from them.
"""

from __future__ import annotations

from xml.etree.ElementTree import Element

from provision.errors import ParseError
from provision.facts import hwloc, nics, nvidia
from provision.facts.model import Gpu, GpuNicLink, RdmaDevice
from provision.facts.topo_matrix import parse_gpu_nic_matrix

HWLOC, TOPO, RDMA = hwloc.SOURCE.name, nvidia.SOURCE_TOPO.name, nics.RDMA_SOURCE.name
_OPENFABRICS_V2 = "3"  # hwloc 1.x and 2.x: osdev_type of an RDMA device
_OPENFABRICS_V3 = 32  # hwloc 3.x: osdev_type is a set of flags, OPENFABRICS among them
_IO = frozenset({"Bridge", "PCIDev", "OSDev"})


def _bus_id(element: Element) -> str | None:
    text = element.get("pci_busid", "")
    parts = text.split(":")
    if len(parts) != 3 or "." not in parts[2]:
        return None
    try:
        return f"{int(parts[0], 16):04x}:{parts[1].lower()}:{parts[2].lower()}"
    except ValueError:
        return None


def _parents(root: Element) -> dict[int, Element]:
    """{id(child): parent} over the <object> tree."""
    parents: dict[int, Element] = {}
    stack = [root]
    while stack:
        element = stack.pop()
        for child in element:
            if child.tag == "object":
                parents[id(child)] = element
                stack.append(child)
    return parents


def _chain(element: Element, parents: dict[int, Element]) -> list[Element]:
    """``element`` and its ancestors, nearest first."""
    chain = [element]
    while id(chain[-1]) in parents:
        chain.append(parents[id(chain[-1])])
    return chain


def _is_host_bridge(element: Element) -> bool:
    return element.get("type") == "Bridge" and element.get("bridge_type", "").startswith("0-")


def _numa_of(chain: list[Element]) -> frozenset[str]:
    """The nodeset of the nearest non-I/O ancestor (hwloc 1.x and 2.x both keep ``nodeset``)."""
    for element in chain:
        if element.get("type") not in _IO and element.tag == "object":
            return frozenset({element.get("nodeset", "")} - {""})
    return frozenset()


def _classify(gpu: list[Element], nic: list[Element]) -> str:
    """The class of the path between two devices, from their ancestor chains."""
    nic_ids = {id(element): position for position, element in enumerate(nic)}
    for gpu_position, element in enumerate(gpu):
        if id(element) not in nic_ids:
            continue
        nic_position = nic_ids[id(element)]
        if element.get("type") == "PCIDev":
            return "PIX"  # one device carries both (e.g. a NIC function of a GPU board)
        if element.get("type") == "Bridge":
            if _is_host_bridge(element):
                return "PHB"
            # bridges strictly between each device and the common bridge
            below = [
                sum(1 for e in chain[1:position] if e.get("type") == "Bridge")
                for chain, position in ((gpu, gpu_position), (nic, nic_position))
            ]
            return "PIX" if max(below) <= 1 else "PXB"
        same_numa = _numa_of(gpu) and _numa_of(gpu) == _numa_of(nic)
        return "NODE" if same_numa else "SYS"
    return "SYS"


def _is_openfabrics(osdev_type: str, v3: bool) -> bool:
    if not v3:
        return osdev_type == _OPENFABRICS_V2
    return osdev_type.isdigit() and len(osdev_type) < 10 and bool(int(osdev_type) & _OPENFABRICS_V3)


def hwloc_links(xml_text: str, gpus: tuple[Gpu, ...], rdma: tuple[RdmaDevice, ...]) -> tuple[GpuNicLink, ...]:
    """Links between ``gpus`` and ``rdma`` devices both found in hwloc's PCI tree (others left out)."""
    root = hwloc._parse_tree(xml_text)  # the same bounded, DTD-free reader as the CPU topology
    tops = [child for child in root if child.tag == "object"]
    if len(tops) != 1:
        raise ParseError(HWLOC, f"expected one root object, found {len(tops)}")
    parents = _parents(tops[0])
    v3 = root.get("version", "1").split(".")[0] not in ("1", "2")
    by_bus: dict[str, Element] = {}
    nic_device: dict[str, Element] = {}
    for element in tops[0].iter("object"):
        if element.get("type") == "PCIDev":
            bus = _bus_id(element)
            if bus is not None:
                by_bus[bus] = element
        elif element.get("type") == "OSDev" and _is_openfabrics(element.get("osdev_type", ""), v3) and id(element) in parents:
            nic_device[element.get("name", "")] = parents[id(element)]
    links = []
    for gpu in gpus:
        if gpu.bus_id not in by_bus:
            continue
        gpu_chain = _chain(by_bus[gpu.bus_id], parents)
        for device in rdma:
            pci = nic_device.get(device.name) or (by_bus.get(device.pci_address) if device.pci_address else None)
            if pci is None:
                continue
            links.append(GpuNicLink(gpu.index, device.name, _classify(gpu_chain, _chain(pci, parents)), HWLOC))
    return tuple(links)


def numa_links(gpus: tuple[Gpu, ...], rdma: tuple[RdmaDevice, ...], source: str) -> tuple[GpuNicLink, ...]:
    """NODE or SYS from the NUMA nodes of GPU and NIC; pairs with an unknown node are left out."""
    return tuple(
        GpuNicLink(gpu.index, device.name, "NODE" if gpu.numa_node == device.numa_node else "SYS", source)
        for gpu in gpus
        for device in rdma
        if gpu.numa_node is not None and device.numa_node is not None
    )


def gpu_nic_links(
    gpus: tuple[Gpu, ...],
    rdma: tuple[RdmaDevice, ...],
    hwloc_xml: str | None,
    topo_text: str | None,
    notes: list[str],
) -> tuple[GpuNicLink, ...]:
    """Every GPU × RDMA device pair's class, each from the best source that has it (see above);
    a source that cannot be read becomes a note and the next one is used."""
    if not gpus or not rdma:
        return ()
    found: dict[tuple[int, str], GpuNicLink] = {}
    if hwloc_xml is not None:
        try:
            for link in hwloc_links(hwloc_xml, gpus, rdma):
                found.setdefault((link.gpu, link.device), link)
        except ParseError as error:
            notes.append(f"GPU-NIC distances not read from hwloc-xml: {error}")
    if topo_text is not None and len(found) < len(gpus) * len(rdma):
        try:
            matrix = parse_gpu_nic_matrix(topo_text)
        except ParseError as error:
            notes.append(f"GPU-NIC distances not read from nvidia-smi topo -m: {error}")
            matrix = {}
        known = {device.name for device in rdma}
        unknown = sorted({device for _, device in matrix} - known)
        if unknown:
            notes.append(f"nvidia-smi topo -m names NIC(s) {', '.join(unknown)} that sysfs-rdma does not list")
        indexes = {gpu.index for gpu in gpus}
        for (gpu, device), distance in matrix.items():
            if device in known and gpu in indexes:
                found.setdefault((gpu, device), GpuNicLink(gpu, device, distance, TOPO))
    if len(found) < len(gpus) * len(rdma):
        for link in numa_links(gpus, rdma, RDMA):
            found.setdefault((link.gpu, link.device), link)
    return tuple(sorted(found.values(), key=lambda link: (link.gpu, link.device)))
