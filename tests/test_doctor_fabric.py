"""doctor's fabric check (provision/doctor/fabric.py): the nodes' rails compared by place, link layer
and rate, never by name; the odd node named with what differs."""

from __future__ import annotations

import dataclasses

from rails_support import card_swapped, with_ports
from test_plan_nics import eight_gpu, nic

from conftest import read_fixture
from plan_support import minsky
from provision.doctor.fabric import check_fabric
from provision.doctor.model import NodeReport
from provision.facts.model import NetInterface
from provision.facts.nics import parse_sysfs_rdma


def report(facts):
    return NodeReport(facts.host, facts=facts)


def test_same_fabric_everywhere_passes_whatever_the_ports_are_called():
    swapped = card_swapped(eight_gpu("c"))  # mlx5_1..9, mlx5_0: the same places, other names
    result = check_fabric([report(eight_gpu("a")), report(eight_gpu("b", "10.0.0.2/24")), report(swapped)])
    assert result.status == "pass", result.detail
    assert result.detail.startswith("every node: 10 usable RDMA ports in the same places (mlx5_0:1, mlx5_1:1,")


def test_a_down_port_and_a_slower_rate_warn_naming_the_node_and_port():
    slow = with_ports(eight_gpu("c"), [2], rate="100 Gb/sec (4X EDR)")
    reports = [report(eight_gpu("a")), report(eight_gpu("b", down=(1,))), report(slow), report(eight_gpu("e"))]
    result = check_fabric(reports)
    assert result.status == "warn" and result.hosts == ("b", "c")
    assert "b: no rail where a has mlx5_1:1 (mlx5_1:1 is DOWN)" in result.detail
    assert "c: mlx5_2:1 at 100 Gb/sec (4X EDR) where a's mlx5_2:1 is at 200 Gb/sec (4X HDR)" in result.detail
    assert result.detail.endswith("(NCCL runs, crossing rails or at the slower rate)")


def test_what_nccl_cannot_connect_fails_another_link_layer_or_a_node_without_a_port():
    roce = with_ports(eight_gpu("c"), range(10), link_layer="Ethernet")
    dead = eight_gpu("d", down=tuple(range(10)))
    result = check_fabric([report(eight_gpu("a")), report(eight_gpu("b")), report(roce), report(dead)])
    assert result.status == "fail" and result.hosts == ("d", "c")
    assert "c: mlx5_0:1 is Ethernet (RoCE) where a's mlx5_0:1 is InfiniBand" in result.detail
    assert "d: no usable RDMA port (NCCL would use sockets there and RDMA on the others)" in result.detail
    everywhere = check_fabric([report(eight_gpu("a", down=tuple(range(10)))), report(dead)])
    assert everywhere.status == "warn" and everywhere.detail.startswith("no node has a usable RDMA port")


def test_fabric_interface_mtu_and_roce_gid_index_are_compared():
    odd_mtu = dataclasses.replace(
        eight_gpu("b"), interfaces=tuple(dataclasses.replace(i, mtu=1500 if i.name == "ib0" else i.mtu) for i in nic("b"))
    )
    same = [dataclasses.replace(eight_gpu(h), interfaces=tuple(dataclasses.replace(i, mtu=4092) for i in nic(h))) for h in "ac"]
    result = check_fabric([report(same[0]), report(odd_mtu), report(same[1])])
    assert result.status == "warn" and result.hosts == ("b",) and "b: ib0 MTU 1500 (others 4092)" in result.detail
    rdma = parse_sysfs_rdma(read_fixture("handwritten", "roce-2port", "sysfs-rdma.txt"))
    roce = [dataclasses.replace(minsky(h), rdma=rdma, interfaces=nic(h)) for h in "xy"]
    port = rdma[0].ports[0]
    moved = tuple(dataclasses.replace(g, index=g.index + 4) for g in port.gids)
    other = (dataclasses.replace(rdma[0], ports=(dataclasses.replace(port, gids=moved),)), *rdma[1:])
    z = dataclasses.replace(minsky("z"), rdma=other, interfaces=nic("z"))
    result = check_fabric([report(roce[0]), report(roce[1]), report(z)])
    assert result.status == "warn" and result.hosts == ("z",) and "z: RoCE v2 GID index mlx5_0/1 7" in result.detail


def test_no_rdma_anywhere_passes_and_unreached_nodes_are_not_compared():
    plain = [dataclasses.replace(minsky(h), interfaces=(NetInterface("eth0", True, ("10.0.0.1/24",)),)) for h in "ab"]
    assert check_fabric([report(f) for f in plain]).status == "pass"
    assert check_fabric([report(eight_gpu("a")), NodeReport("b", error="unreachable")]).status == "pass"
