"""Parsers for small system captures: hostname, ``uname -m``, ``/proc/meminfo``, ``ip -o``."""

from __future__ import annotations

import re

from provision.errors import ParseError
from provision.facts.model import NetInterface
from provision.facts.registry import Fact
from provision.text import shown_value

# /proc reads are shell builtins: no process started (the probe runs on every node at once).
HOSTNAME = Fact(
    "hostname",
    (),
    'if [ -r /proc/sys/kernel/hostname ]; then read -r h </proc/sys/kernel/hostname && echo "$h"; else hostname; fi',
    "the name the host calls itself",
)
UNAME_M = Fact("uname-m", ("uname",), "uname -m", "machine architecture")
# MemTotal is /proc/meminfo's first line; sh's `read` takes one byte per system call, so only it.
MEMINFO = Fact("meminfo", (), 'read -r l </proc/meminfo && echo "$l"', "memory (the MemTotal line of /proc/meminfo)")
IP_ADDR = Fact("ip-addr", ("ip",), "ip -o addr show", "interface addresses")
IP_LINK = Fact("ip-link", ("ip",), "ip -o link show", "interface state")

_HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*\Z")
_ARCH = re.compile(r"^[A-Za-z0-9_]+\Z")
_MEMTOTAL = re.compile(r"^MemTotal:\s+([0-9]{1,18})\s+kB\s*$", re.MULTILINE)


@HOSTNAME.parses
def parse_hostname(text: str) -> str:
    """The single word ``hostname`` prints."""
    name = text.strip()
    if not _HOSTNAME.match(name):
        raise ParseError(HOSTNAME.name, f"not a host name: {shown_value(name[:60])}", 1)
    return name


@UNAME_M.parses
def parse_arch(text: str) -> str:
    """``uname -m`` -> ``x86_64``, ``ppc64le``, ``aarch64``..."""
    arch = text.strip()
    if not _ARCH.match(arch):
        raise ParseError(UNAME_M.name, f"not a machine name: {shown_value(arch[:60])}", 1)
    return arch


@MEMINFO.parses
def parse_meminfo(text: str) -> int:
    """``/proc/meminfo`` -> total memory in MiB."""
    match = _MEMTOTAL.search(text)
    if not match:
        raise ParseError(MEMINFO.name, "no 'MemTotal: N kB' line")
    return int(match.group(1)) // 1024


def parse_ip_addr(addr_text: str, link_text: str) -> tuple[NetInterface, ...]:
    """Join ``ip -o addr show`` and ``ip -o link show`` into interfaces with state and addresses."""
    up: dict[str, bool] = {}
    order: list[str] = []
    for number, raw in enumerate(link_text.splitlines(), start=1):
        if not raw.strip():
            continue
        match = re.match(r"^\d+:\s+([^:@\s]+)(?:@[^:]+)?:\s+<([^>]*)>", raw)
        if not match:
            raise ParseError(IP_LINK.name, f"unexpected line {shown_value(raw.strip()[:60])}", number)
        name, flags = match.group(1), match.group(2).split(",")
        up[name] = "UP" in flags and "LOWER_UP" in flags
        order.append(name)
    addresses: dict[str, list[str]] = {name: [] for name in order}
    for number, raw in enumerate(addr_text.splitlines(), start=1):
        if not raw.strip():
            continue
        match = re.match(r"^\d+:\s+(\S+)\s+(inet6?)\s+(\S+)", raw)
        if not match:
            raise ParseError(IP_ADDR.name, f"unexpected line {shown_value(raw.strip()[:60])}", number)
        name = match.group(1).split("@")[0]
        if name not in addresses:
            addresses[name] = []
            order.append(name)
        addresses[name].append(match.group(3))
    return tuple(NetInterface(name, up.get(name, False), tuple(addresses[name])) for name in order)


# Each of the pair alone: the other's lines missing mean "down" or "no address", never an error.
@IP_ADDR.parses
def parse_addresses(text: str) -> tuple[NetInterface, ...]:
    """The interfaces ``ip -o addr show`` names, with their addresses (state unknown: down)."""
    return parse_ip_addr(text, "")


@IP_LINK.parses
def parse_links(text: str) -> tuple[NetInterface, ...]:
    """The interfaces ``ip -o link show`` names, with their state (no addresses)."""
    return parse_ip_addr("", text)
