"""RDMA devices and interfaces from sysfs (real dumps from hwloc's test suite), and GPU↔NIC distance."""

from __future__ import annotations

import pytest

from conftest import FIXTURES, capture_dir, read_fixture
from provision.errors import ParseError
from provision.facts.derive import derive_facts
from provision.facts.model import Gpu, HostFacts, RdmaDevice
from provision.facts.nic_distance import gpu_nic_links, hwloc_links
from provision.facts.nics import parse_sysfs_net, parse_sysfs_rdma, with_sysfs
from provision.facts.system import parse_ip_addr
from provision.probe.gather import STEPS


def test_real_infiniband_tree_mlx4_fdr():
    (device,) = parse_sysfs_rdma(read_fixture("captures", "hwloc-32em64t-mlx4", "sysfs-rdma.txt"))
    assert (device.name, device.pci_address, device.numa_node) == ("mlx4_0", "0000:82:00.0", 1)
    (port,) = device.ports
    assert (port.number, port.state, port.phys_state, port.link_layer, port.rate) == (
        1,
        "ACTIVE",
        "LinkUp",
        "InfiniBand",
        "56 Gb/sec (4X FDR)",
    )
    # 128 GID entries in the dump; the unused ones (zero interface id) are no address
    assert [(g.index, g.gid, g.type, g.netdev) for g in port.gids] == [(0, "fe80:0000:0000:0000:0002:c903:00f9:bfa1", None, None)]
    assert port.active and not port.roce


def test_real_qlogic_tree_and_its_interfaces():
    (device,) = parse_sysfs_rdma(read_fixture("captures", "hwloc-40intel64-qib", "sysfs-rdma.txt"))
    assert (device.name, device.pci_address, device.numa_node, device.ports[0].rate) == (
        "qib0",
        "0000:43:00.0",
        2,
        "40 Gb/sec (4X QDR)",
    )
    net = parse_sysfs_net(read_fixture("captures", "hwloc-40intel64-qib", "sysfs-net.txt"))
    assert net["ib0"] == {"mtu": 2044, "pci_address": "0000:43:00.0", "numa_node": 2}  # IPoIB: no speed file
    assert net["eth0"] == {"mtu": 1500, "speed_mbps": 1000, "pci_address": "0000:02:00.0", "numa_node": None}


def test_container_interfaces_have_no_pci_device():
    # the real sysfs-net of a test-cluster container (veth): MTU only, nothing behind it
    captures = capture_dir("node-container")
    interfaces = parse_ip_addr(captures["ip-addr"], captures["ip-link"])
    net = parse_sysfs_net(read_fixture("captures", "node-container", "sysfs-net.txt"))
    joined = {i.name: i for i in with_sysfs(interfaces, net)}
    assert joined["eth0"].mtu == 1500 and joined["eth0"].pci_address is None and joined["eth0"].ipv4()
    assert joined["lo"].mtu == 65536


def test_roce_gid_table_with_types_and_interfaces():  # hand-written from the sysfs layout (SOURCES.md)
    devices = {d.name: d for d in parse_sysfs_rdma(read_fixture("handwritten", "roce-2port", "sysfs-rdma.txt"))}
    port = devices["mlx5_0"].ports[0]
    assert port.roce and port.netdev() == "ens1f0"
    assert [(g.index, g.type, g.ipv4_mapped) for g in port.gids] == [
        (0, "IB/RoCE v1", False),
        (1, "RoCE v2", False),
        (2, "IB/RoCE v1", True),
        (3, "RoCE v2", True),
    ]
    assert devices["mlx5_1"].ports[0].state == "DOWN" and not devices["mlx5_1"].ports[0].active


@pytest.mark.parametrize(
    "line, says",
    [
        ("/etc/passwd:root:x:0:0", "unexpected path"),
        ("/sys/class/infiniband/mlx5_0/ports/1/state:ACTIVE", "bad state"),
        ("/sys/class/infiniband/mlx5_0/ports/1/gids/0:not-a-gid", "bad GID"),
        ("/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0:$(reboot)", "bad interface name"),
        ("/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/0:RoCE v9", "unknown GID type"),
        ("/sys/class/infiniband/mlx5_0/ports/1/link_layer:Token Ring", "unknown link layer"),
        ("/sys/class/infiniband/a;rm -rf ~/ports/1/state:4: ACTIVE", "unexpected path"),
        ("/sys/class/infiniband/mlx5_0/ports/1/gids/9999:fe80:0000:0000:0000:0000:0000:0000:0001", "GID index"),
        ("no colon at all", "PATH:VALUE"),
    ],
)
def test_hostile_rdma_lines_are_refused_naming_the_line(line, says):
    with pytest.raises(ParseError, match=says) as error:
        parse_sysfs_rdma("/sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE\n" + line + "\n")
    assert error.value.line == 2


def test_bounds():
    many = "".join(f"/sys/class/infiniband/d{i}/ports/1/state:4: ACTIVE\n" for i in range(300))
    with pytest.raises(ParseError, match="more than 256 RDMA devices"):
        parse_sysfs_rdma(many)
    with pytest.raises(ParseError, match="no state"):
        parse_sysfs_rdma("/sys/class/infiniband/mlx5_0/ports/1/rate:100 Gb/sec (4X EDR)\n")
    with pytest.raises(ParseError, match="bad mtu"):
        parse_sysfs_net("/sys/class/net/eth0/mtu:lots\n")
    assert parse_sysfs_rdma("") == () and parse_sysfs_net("") == {}  # no RDMA device: a fact, not an error


def test_both_steps_run_in_the_one_gather_script():
    names = [step.name for step in STEPS]
    assert "sysfs-rdma" in names and "sysfs-net" in names
    for step in STEPS:
        if step.name.startswith(("sysfs-rdma", "sysfs-net")):
            assert step.needs == () and step.command.count("grep") == 1  # one process each, no loop


GPU6 = Gpu(0, "GeForce 8800", "0000:06:00.0", None, 0, 0, "test")


@pytest.mark.parametrize("name", ["xeon-2n6c2t-pci.v2.xml", "xeon-2n6c2t-pci.v1.xml"])
def test_hwloc_tree_gpu_and_hca_under_one_host_bridge_is_phb(name):
    # hwloc's own export: the GPU behind root port 00:07.0, mlx4_0 behind 00:05.0, one host bridge
    xml = read_fixture("hwloc", name)
    assert hwloc_links(xml, (GPU6,), (RdmaDevice("mlx4_0", None, 0, ()),))[0].distance == "PHB"


def test_hwloc_tree_pix_pxb_node_sys_from_the_real_mic_export():
    # hwloc's export of the 32em64t machine whose sysfs is captured above: mlx4_0 at 82:00.0 behind
    # root port 80:02.2 on NUMA node 1; eth0 (02:00.0) behind 00:01.1 on node 0.
    xml = (FIXTURES / "hwloc" / "xeon-32em64t-mic-mlx4.xml").read_text()
    mlx4 = RdmaDevice("mlx4_0", "0000:82:00.0", 1, ())
    as_gpu = lambda bus: (Gpu(0, "stand-in: the PCI device at this address", bus, None, None, None, "test"),)  # noqa: E731
    assert hwloc_links(xml, as_gpu("0000:02:00.3"), (mlx4,))[0].distance == "SYS"  # other NUMA node
    assert hwloc_links(xml, as_gpu("0000:82:00.0"), (mlx4,))[0].distance == "PIX"  # the same device


def test_links_fall_back_from_hwloc_to_topo_to_numa_with_notes():
    gpus = (Gpu(0, "V100", "0004:04:00.0", None, 0, 0, "test"), Gpu(2, "V100", "0035:03:00.0", None, 8, 1, "test"))
    rdma = tuple(RdmaDevice(f"mlx5_{i}", None, 0 if i < 2 else 8, ()) for i in range(6))
    notes: list[str] = []
    links = gpu_nic_links(gpus, rdma, None, read_fixture("captures", "ac922", "nvidia-smi-topo.txt"), notes)
    assert {(link.gpu, link.device): link.distance for link in links if link.device in ("mlx5_0", "mlx5_2")} == {
        (0, "mlx5_0"): "NODE",
        (0, "mlx5_2"): "SYS",
        (2, "mlx5_0"): "SYS",
        (2, "mlx5_2"): "NODE",
    }
    assert {link.source for link in links} == {"nvidia-smi-topo"} and not notes
    cut = read_fixture("captures", "ac922", "nvidia-smi-topo.txt").replace(
        "\tSYS\tNODE\tNODE\tNODE\tNODE\t64-127\t8\nGPU3", "\nGPU3"
    )
    links = gpu_nic_links(gpus, rdma, "<topology", cut, notes)
    assert {link.source for link in links} == {"sysfs-rdma"}  # NUMA nodes: NODE or SYS only
    assert any("hwloc-xml" in note for note in notes) and any("row cut off" in note for note in notes)


def test_derive_keeps_rdma_interfaces_and_notes_a_down_port():
    captures = capture_dir("node-container") | {
        "sysfs-rdma": read_fixture("handwritten", "roce-2port", "sysfs-rdma.txt"),
        "sysfs-net": read_fixture("captures", "node-container", "sysfs-net.txt"),
    }
    facts = derive_facts("n1", captures)
    assert [d.name for d in facts.rdma] == ["mlx5_0", "mlx5_1", "mlx5_2"] and facts.sources["rdma"] == "sysfs-rdma"
    assert any("mlx5_1 port 1 is DOWN (Disabled): never chosen" in note for note in facts.notes)
    assert HostFacts.from_dict(facts.to_dict()) == facts  # round-trips through the facts cache
    broken = derive_facts("n1", captures | {"sysfs-rdma": "garbage\n"})
    assert broken.rdma == () and any("network facts incomplete" in note for note in broken.notes)
