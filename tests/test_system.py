"""hostname, uname -m, meminfo and ip parsers."""

import pytest

from conftest import read_fixture
from provision.errors import ParseError
from provision.facts.system import parse_arch, parse_hostname, parse_ip_addr, parse_meminfo


def test_real_vm_captures():
    captures = "captures", "vm-x86"
    assert parse_arch(read_fixture(*captures, "uname-m.txt")) == "x86_64"
    assert parse_meminfo(read_fixture(*captures, "meminfo.txt")) > 1000
    interfaces = parse_ip_addr(read_fixture(*captures, "ip-addr.txt"), read_fixture(*captures, "ip-link.txt"))
    lo = next(i for i in interfaces if i.name == "lo")
    assert lo.up and "127.0.0.1/8" in lo.addresses


def test_container_interface_with_peer_suffix():
    interfaces = parse_ip_addr(
        read_fixture("captures", "node-container", "ip-addr.txt"), read_fixture("captures", "node-container", "ip-link.txt")
    )
    assert any(i.name == "eth0" and i.up and i.addresses for i in interfaces)


@pytest.mark.parametrize(
    "call, text",
    [
        (parse_hostname, "bad host;name"),
        (parse_arch, "x86 64"),
        (parse_meminfo, "nothing"),
        (lambda t: parse_ip_addr(t, ""), "garbage"),
    ],
)
def test_garbage(call, text):
    with pytest.raises(ParseError):
        call(text)
