"""The NFS export list by default: the addresses the controller reached each inventory host at
(its SSH connection's peer, host key verified), never what a node reports about itself; what a
node reports is only checked against it (a warning naming the host and nfs_clients)."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

from provision.engine.membership import cached_hostvars, fill_hostvars, record_of, verified_addresses
from provision.errors import TemplateError
from provision.inventory.model import Host, Inventory
from provision.templating.nfs_clients import cluster_addresses, unreported_addresses, verified_address
from provision.transport.session import Session, plain_address

OUTSIDE = "203.0.113.9"  # TEST-NET-3 (RFC 5737): an address outside every cluster


def node(verified, reported, **extra):
    """A host's hostvars: the address(es) the controller verified, the addresses it reports."""
    facts = {"hostname": "n", "addresses": list(reported), "host_keys": ["ssh-ed25519 K"]}
    return {"facts": facts, "verified_addresses": list(verified), "inventory_port": 22, **extra}


# (case, hostvars, the export list)
EXPORTS = [
    (
        "an outside address a node reports is not exported to",
        {"n1": node(["10.0.0.1"], ["10.0.0.1"]), "n2": node(["10.0.0.2"], ["10.0.0.2", OUTSIDE, "2001:db8::7"])},
        ["10.0.0.1", "10.0.0.2"],
    ),
    (
        "the connected address is exported to even when the node does not report it (NAT)",
        {"n1": node(["192.0.2.10"], ["10.0.0.1"]), "n2": node(["192.0.2.11"], ["10.0.0.2"])},
        ["192.0.2.10", "192.0.2.11"],
    ),
    (
        "a node claiming another node's address changes nothing",
        {"n1": node(["10.0.0.1"], ["10.0.0.1"]), "n2": node(["10.0.0.2"], ["10.0.0.2", "10.0.0.1"])},
        ["10.0.0.1", "10.0.0.2"],
    ),
    (
        "a cached host: the address verified when it was last reached",
        {"n1": node(["10.0.0.1"], ["10.0.0.1"]), "n2": node(["10.0.0.2"], [OUTSIDE], cached=True)},
        ["10.0.0.1", "10.0.0.2"],
    ),
    (
        "hosts reached through one NAT address: listed once",
        {"n1": node(["127.0.0.1"], ["172.18.0.2"]), "n2": node(["127.0.0.1"], ["172.18.0.3"])},
        ["127.0.0.1"],
    ),
]


@pytest.mark.parametrize(("hostvars", "exported"), [c[1:] for c in EXPORTS], ids=[c[0] for c in EXPORTS])
def test_export_list_is_the_verified_addresses(hostvars, exported):
    assert cluster_addresses(hostvars) == exported


@pytest.mark.parametrize(
    "values",
    [
        {"facts": {}, "unknown": True},  # nothing known of it
        node([], ["10.0.0.3"], cached=True),  # cached by a run before the controller kept verified addresses
        {"facts": {"addresses": ["10.0.0.3"]}, "cached": True, "verified_addresses": "10.0.0.3"},  # not a list
    ],
    ids=["unknown", "cached without a verified address", "malformed"],
)
def test_a_host_without_a_verified_address_is_named(values):
    hostvars = {"n1": node(["10.0.0.1"], ["10.0.0.1"]), "n3": values}
    with pytest.raises(TemplateError, match=r"^no address known of n3 \(not reached .*or set nfs_clients$"):
        cluster_addresses(hostvars)


def test_clients_mount_from_where_the_controller_reached_the_server():
    hostvars = {"s1": node(["10.0.0.1"], [OUTSIDE, "10.0.0.1"]), "n2": node([], ["10.0.0.2"], cached=True)}
    assert verified_address(hostvars, "s1") == "10.0.0.1"  # never its first reported address
    with pytest.raises(TemplateError, match=r"^no address known of n2 .*or set nfs_server_address$"):
        verified_address(hostvars, "n2")


# (case, hostvars, the hosts the warning names, or None)
WARNINGS = [
    ("every host reports where it was reached", {"n1": node(["10.0.0.1"], ["10.0.0.1", OUTSIDE])}, None),
    (
        "NAT: the reached address is not reported",
        {"n1": node(["10.0.0.1"], ["10.0.0.1"]), "n2": node(["192.0.2.11"], ["10.0.0.2"])},
        ["n2 at 192.0.2.11"],
    ),
    ("IPv6 spelled another way", {"n1": node(["fd00::1"], ["fd00:0:0::1"])}, None),
    ("a cached host was checked when it was reached", {"n1": node(["192.0.2.10"], ["10.0.0.1"], cached=True)}, None),
    ("reached by name through a jump host: nothing to compare", {"n1": node(["node01"], ["10.0.0.1"])}, None),
    (
        "every host behind one published address",
        {"r1": node(["127.0.0.1"], ["172.18.0.2"]), "r2": node(["127.0.0.1"], ["172.18.0.3"])},
        ["r1 at 127.0.0.1", "r2 at 127.0.0.1"],
    ),
]


@pytest.mark.parametrize(("hostvars", "named"), [c[1:] for c in WARNINGS], ids=[c[0] for c in WARNINGS])
def test_a_reached_address_the_node_does_not_report_is_one_warning(hostvars, named):
    warning = unreported_addresses(hostvars)
    if named is None:
        assert warning is None
        return
    assert warning.startswith(f"NFS exports: the controller reached {', '.join(named)}, an address ")
    assert warning.endswith("set nfs_clients in the inventory to the addresses or networks the clients mount from")
    assert "\n" not in warning


# -- where the verified address comes from, and how it is kept -------------------------------------
def _run(host, connected, reported):
    return SimpleNamespace(host=host, connected_address=connected, identity=lambda: {"addresses": reported})


def test_verified_addresses_come_from_the_connection_never_the_report():
    assert verified_addresses(_run(Host("n1", address="10.0.0.1"), "10.0.0.1", ["10.0.0.1", OUTSIDE])) == ["10.0.0.1"]
    assert verified_addresses(_run(Host("n1", address="10.0.0.1"), None, ["10.0.0.1", OUTSIDE])) == []
    # localhost: no SSH; the controller read its own addresses itself
    assert verified_addresses(_run(Host("localhost"), None, ["10.0.0.9"])) == ["10.0.0.9"]


def test_live_hostvars_and_cache_record_carry_the_verified_address(tmp_path):
    inventory = Inventory(hosts={"n1": Host("n1", address="node01", port=22)}, path=tmp_path / "hosts.yml")
    run = SimpleNamespace(
        host=inventory.hosts["n1"],
        connected_address="10.0.0.1",
        untrusted=False,
        registered={},
        identity=lambda: {"hostname": "n1", "addresses": ["10.0.0.1", OUTSIDE], "host_keys": ["ssh-ed25519 K"]},
    )
    hostvars: dict = {}
    fill_hostvars(hostvars, inventory, {"n1": run}, {"n1": None})
    assert hostvars["n1"]["verified_addresses"] == ["10.0.0.1"]
    record = record_of(hostvars["n1"], None, set())
    assert record["verified_addresses"] == ["10.0.0.1"] and record["inventory_address"] == "node01"
    # the next run leaves n1 out: its verified address is used, never its report
    assert cluster_addresses({"n1": cached_hostvars("n1", record, "node01", 22)}) == ["10.0.0.1"]


@pytest.mark.parametrize(("address", "port"), [("node01-new", 22), ("node01", 2222)], ids=["address changed", "port changed"])
def test_a_cached_address_is_stale_once_the_inventory_reaches_the_host_another_way(address, port):
    record = {"facts": {"addresses": ["10.0.0.1"]}, "inventory_address": "node01", "inventory_port": 22}
    record["verified_addresses"] = ["10.0.0.1"]
    assert cached_hostvars("n1", record, "node01", 22)["verified_addresses"] == ["10.0.0.1"]
    assert cached_hostvars("n1", record, address, port)["verified_addresses"] == []


def test_connected_address_is_the_sockets_peer(tmp_path):
    """The controller's own TCP socket says where it connected (a real socket, over loopback)."""
    with socket.create_server(("127.0.0.1", 0)) as server, socket.create_connection(server.getsockname()) as sock:
        session = Session(Host("n1", address="n1.cluster"), None)
        transport = SimpleNamespace(sock=sock)
        session._connection = SimpleNamespace(host="n1.cluster", client=SimpleNamespace(get_transport=lambda: transport))
        assert session.connected_address() == "127.0.0.1"
        # through a ProxyJump hop (a paramiko Channel, no socket): what the last hop was asked to reach
        transport.sock = object()
        assert session.connected_address() == "n1.cluster"
        # the inventory's bracketed IPv6 address (ADDRESS allows it): the address, as exports name it
        session._connection.host = "[fd00::4a]"
        assert session.connected_address() == "fd00::4a"
    assert Session(Host("localhost"), None).connected_address() is None


@pytest.mark.parametrize(
    ("peer", "plain"),
    [("10.0.0.7", "10.0.0.7"), ("::ffff:10.0.0.7", "10.0.0.7"), ("fe80::1%eth0", "fe80::1"), ("fd00::4a", "fd00::4a")],
)
def test_plain_address(peer, plain):
    assert plain_address(peer) == plain
