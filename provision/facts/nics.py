"""RDMA devices (``/sys/class/infiniband``) and network interfaces (``/sys/class/net``) from sysfs.

Both captures are one ``grep -H`` each (one process, no shell loop): every line is
``PATH:VALUE``. Sysfs paths hold no ``:`` (the kernel refuses it in device and interface
names), so the first ``:`` ends the path. Zero GIDs (the unused entries of a GID table, 128 to
256 a port) are left out on the node, and ``gid_attrs`` of an unused entry cannot be read
(EINVAL, silenced by ``-s``). No directory: no output, "no RDMA device" is a fact.

The output comes from a node and is hostile: each path is matched whole against the few shapes
sysfs has, names and numbers are bounded, and the number of lines, devices, ports and GIDs is
capped; anything else raises :class:`ParseError` naming the capture and the line.
"""

from __future__ import annotations

import re
from dataclasses import replace

from provision.errors import ParseError
from provision.facts.bounds import MAX_RDMA_DEVICES
from provision.facts.model import NetInterface, RdmaDevice, RdmaGid, RdmaPort
from provision.facts.registry import Fact
from provision.text import shown_value

_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
RDMA_SOURCE = Fact(
    "sysfs-rdma",
    (),
    "[ -d /sys/class/infiniband ] && grep -rsH -v -x "
    + _ZERO_GID
    + " /sys/class/infiniband/*/device/uevent /sys/class/infiniband/*/device/numa_node"
    " /sys/class/infiniband/*/ports/*/state /sys/class/infiniband/*/ports/*/phys_state"
    " /sys/class/infiniband/*/ports/*/link_layer /sys/class/infiniband/*/ports/*/rate"
    " /sys/class/infiniband/*/ports/*/gids /sys/class/infiniband/*/ports/*/gid_attrs; :",
    "RDMA devices: ports, state, link layer, rate, GIDs with type and interface",
)
NET_SOURCE = Fact(
    "sysfs-net",
    (),
    "grep -sH . /sys/class/net/*/mtu /sys/class/net/*/speed /sys/class/net/*/device/uevent /sys/class/net/*/device/numa_node; :",
    "network interfaces: MTU, speed, the PCI device and NUMA node behind each",
)

MAX_LINES = 200_000
MAX_DEVICES = MAX_RDMA_DEVICES  # see provision.facts.bounds
MAX_PORTS = 64
MAX_GID_INDEX = 4096
_NAME = r"[A-Za-z0-9_.-]{1,64}"
_NAME_RE = re.compile(rf"^{_NAME}\Z")
_RDMA_PATH = re.compile(
    rf"^/sys/class/infiniband/({_NAME})/(?:device/(uevent|numa_node)"
    r"|ports/([0-9]{1,3})/(state|phys_state|link_layer|rate|gids/([0-9]{1,4})|gid_attrs/(types|ndevs)/([0-9]{1,4})))\Z"
)
_NET_PATH = re.compile(rf"^/sys/class/net/({_NAME})/(mtu|speed|device/uevent|device/numa_node)\Z")
_GID = re.compile(r"^[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}\Z")
_STATE = re.compile(r"^[0-9]{1,2}: ([A-Z_]{1,20})\Z")
_PHYS = re.compile(r"^[0-9]{1,2}: ([A-Za-z ]{1,40})\Z")
_RATE = re.compile(r"^[0-9][0-9.]{0,9} Gb/sec(?: \([A-Za-z0-9 ]{1,20}\))?\Z")
_SLOT = re.compile(r"^PCI_SLOT_NAME=([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\Z")
_INT = re.compile(r"^-?[0-9]{1,9}\Z")
_NO_INTERFACE_ID = ":0000:0000:0000:0000"
_GID_TYPES = frozenset({"IB/RoCE v1", "RoCE v2"})


def is_name(text: str) -> bool:
    """True for a device or interface name this module accepts (also safe in shell text)."""
    return bool(_NAME_RE.match(text))


def _lines(text: str, source: str):
    """(number, path, value) for each non-empty line, bounded."""
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise ParseError(source, f"{len(lines)} lines, over the {MAX_LINES} limit")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        path, colon, value = raw.partition(":")
        if not colon:
            raise ParseError(source, f"expected PATH:VALUE, got {shown_value(raw[:60])}", number)
        yield number, path, value.strip()


def _pci(value: str) -> str | None:
    match = _SLOT.match(value)
    if match is None:
        return None
    domain, bus, function = match.group(1).split(":")
    return f"{int(domain, 16):04x}:{bus.lower()}:{function.lower()}"


def _numa(value: str, source: str, number: int) -> int | None:
    if not _INT.match(value):
        raise ParseError(source, f"bad NUMA node {shown_value(value[:20])}", number)
    return int(value) if int(value) >= 0 else None


@RDMA_SOURCE.parses
def parse_sysfs_rdma(text: str) -> tuple[RdmaDevice, ...]:
    """RDMA devices, by name, each with its PCI address, NUMA node and ports (GIDs by index)."""
    source = RDMA_SOURCE.name
    devices: dict[str, dict] = {}
    for number, path, value in _lines(text, source):
        match = _RDMA_PATH.match(path)
        if match is None:
            raise ParseError(source, f"unexpected path {shown_value(path[:80])}", number)
        name, device_file, port_text, port_file, gid_index, attr_kind, attr_index = match.groups()
        if name not in devices and len(devices) >= MAX_DEVICES:
            raise ParseError(source, f"more than {MAX_DEVICES} RDMA devices", number)
        device = devices.setdefault(name, {"pci": None, "numa": None, "ports": {}})
        if device_file == "uevent":
            device["pci"] = _pci(value) or device["pci"]
            continue
        if device_file == "numa_node":
            device["numa"] = _numa(value, source, number)
            continue
        port_number = int(port_text)
        if port_number not in device["ports"] and len(device["ports"]) >= MAX_PORTS:
            raise ParseError(source, f"{name}: more than {MAX_PORTS} ports", number)
        port = device["ports"].setdefault(port_number, {"gids": {}, "types": {}, "ndevs": {}})
        index = int(gid_index or attr_index or 0)
        if index >= MAX_GID_INDEX:
            raise ParseError(source, f"{name} port {port_number}: GID index {index} over {MAX_GID_INDEX}", number)
        if port_file == "state":
            state = _STATE.match(value)
            if state is None:
                raise ParseError(source, f"{name} port {port_number}: bad state {shown_value(value[:30])}", number)
            port["state"] = state.group(1)
        elif port_file == "phys_state":
            phys = _PHYS.match(value)
            port["phys_state"] = phys.group(1) if phys else None
        elif port_file == "link_layer":
            if value not in ("InfiniBand", "Ethernet"):
                raise ParseError(source, f"{name} port {port_number}: unknown link layer {shown_value(value[:30])}", number)
            port["link_layer"] = value
        elif port_file == "rate":
            port["rate"] = value if _RATE.match(value) else None
        elif gid_index is not None:
            if not _GID.match(value):
                raise ParseError(source, f"{name} port {port_number}: bad GID {shown_value(value[:50])}", number)
            if not value.endswith(_NO_INTERFACE_ID):  # an unused entry (zero interface id): no address
                port["gids"][index] = value.lower()
        elif attr_kind == "types":
            if value not in _GID_TYPES:
                raise ParseError(source, f"{name} port {port_number}: unknown GID type {shown_value(value[:30])}", number)
            port["types"][index] = value
        else:
            if not _NAME_RE.match(value):
                raise ParseError(source, f"{name} port {port_number}: bad interface name {shown_value(value[:30])}", number)
            port["ndevs"][index] = value
    result = []
    for name in sorted(devices):
        device = devices[name]
        ports = []
        for port_number in sorted(device["ports"]):
            port = device["ports"][port_number]
            if "state" not in port:
                raise ParseError(source, f"{name} port {port_number}: no state")
            gids = tuple(
                RdmaGid(index, gid, port["types"].get(index), port["ndevs"].get(index))
                for index, gid in sorted(port["gids"].items())
            )
            ports.append(
                RdmaPort(port_number, port["state"], port.get("phys_state"), port.get("link_layer"), port.get("rate"), gids)
            )
        result.append(RdmaDevice(name, device["pci"], device["numa"], tuple(ports)))
    return tuple(result)


@NET_SOURCE.parses
def parse_sysfs_net(text: str) -> dict[str, dict]:
    """{interface: {"mtu", "speed_mbps", "pci_address", "numa_node"}} (only what sysfs printed)."""
    source = NET_SOURCE.name
    found: dict[str, dict] = {}
    for number, path, value in _lines(text, source):
        match = _NET_PATH.match(path)
        if match is None:
            raise ParseError(source, f"unexpected path {shown_value(path[:80])}", number)
        name, kind = match.groups()
        if name not in found and len(found) >= MAX_DEVICES * 16:
            raise ParseError(source, "too many interfaces", number)
        entry = found.setdefault(name, {})
        if kind == "device/uevent":
            pci = _pci(value)
            if pci is not None:
                entry["pci_address"] = pci
        elif not _INT.match(value):
            raise ParseError(source, f"{name}: bad {kind} {shown_value(value[:20])}", number)
        elif kind == "mtu":
            entry["mtu"] = int(value)
        elif kind == "speed":
            entry["speed_mbps"] = int(value) if int(value) > 0 else None  # -1: link down or unknown
        else:
            entry["numa_node"] = int(value) if int(value) >= 0 else None
    return found


def with_sysfs(interfaces: tuple[NetInterface, ...], sysfs: dict[str, dict]) -> tuple[NetInterface, ...]:
    """The interfaces from ``ip``, each completed with what sysfs says about it."""
    return tuple(replace(interface, **sysfs.get(interface.name, {})) for interface in interfaces)
