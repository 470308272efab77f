"""hwloc XML parser on real exports of real machines (tests/fixtures/SOURCES.md), checked against real hwloc."""

import re
from collections import defaultdict

import pytest

from conftest import FIXTURES, read_fixture
from provision.errors import ParseError
from provision.facts import hwloc


def parse(*parts):
    return hwloc.parse_hwloc_xml(read_fixture(*parts))


def shape(*parts):
    return hwloc.cpu_topology(parse(*parts)).shape()


# sockets x cores x threads as each export really holds it (counted in the XML; see also the grep
# cross-check and the hwloc-calc oracle below).
SHAPES = {
    ("hwloc", "amd-epyc-7451-2p.xml"): "2x24x2",
    ("hwloc", "intel-knl-7210.xml"): "1x64x4",
    ("hwloc", "intel-skylake-2x6140.xml"): "2x18x2",
    ("hwloc", "intel-raptorlake-1370p-hybrid.xml"): "1x14x2",  # 6 P-cores x 2 threads + 8 E-cores x 1
    ("hwloc", "nvidia-dgx-gb10-arm-hybrid.xml"): "1x20x1",  # 10 Cortex-X925 + 10 Cortex-A725
    ("hwloc", "nvidia-dgx2.xml"): "2x2x1",  # exported restricted to 4 PUs
    ("hwloc", "power8-minsky-gpus.xml"): "2x4x2",  # exported restricted to 16 PUs
    ("hwloc", "xeon-2n6c2t-pci.v1.xml"): "2x6x2",
    ("hwloc", "xeon-2n6c2t-pci.v2.xml"): "2x6x2",
    ("hwloc", "xeon-4s2c2t-offlines.xml"): "4x2/1/1/2x2",  # offline PUs: uneven cores, 7 PUs
    ("captures", "arm-hybrid-a510-x3", "hwloc-xml.txt"): "3x3/4/1x1",  # clusters reported as packages
    ("captures", "power7-lpar-pkg-minus1", "hwloc-xml.txt"): "4x1x4",
    ("captures", "sparc64-pkg-minus1", "hwloc-xml.txt"): "6x1x1",
    ("captures", "node-hwloc", "hwloc-xml.txt"): "1x2x1",
}


@pytest.mark.parametrize("parts", sorted(SHAPES), ids="/".join)
def test_real_exports_shape(parts):
    assert shape(*parts) == SHAPES[parts]


@pytest.mark.parametrize("parts", sorted(SHAPES), ids="/".join)
def test_object_counts_match_a_plain_count_of_the_xml(parts):
    text = read_fixture(*parts)
    topology = parse(*parts)
    cores = [core for package in topology.packages for core in package.cores]
    assert len(topology.packages) == len(re.findall(r'<object type="(?:Package|Socket)"', text))
    assert len(cores) == text.count('<object type="Core"')
    assert sum(len(core.pus) for core in cores) == text.count('<object type="PU"')
    assert [core.logical_index for core in cores] == list(range(len(cores)))


def oracle() -> dict[str, dict[tuple[int, int], tuple[int, ...]]]:
    """What real hwloc 2.9's hwloc-calc says each ``S:C`` is (tests/fixtures/hwloc/oracle.sh)."""
    slots: dict[str, dict[tuple[int, int], tuple[int, ...]]] = defaultdict(dict)
    for line in read_fixture("hwloc", "hwloc-calc-2.9.txt").splitlines():
        name, slot, pus = line.split()
        socket, core = slot.split(":")
        slots[name][(int(socket), int(core))] = tuple(int(pu) for pu in pus.split(","))
    return slots


def test_oracle_covers_every_fixture():
    assert {tuple(name.split("/")) for name in oracle()} == set(SHAPES)


@pytest.mark.parametrize("name", sorted(oracle()))
def test_slot_numbering_is_hwlocs(name):
    """slot=S:C names the same PUs here as in real hwloc (logical package S, logical core C inside it)."""
    topology = parse(*name.split("/"))
    mine = {(package.logical_index, core.index): core.pus for package in topology.packages for core in package.cores}
    assert mine == oracle()[name]


def test_logical_order_is_not_os_index_order():
    # On this Skylake the cores' OS indexes are not ascending in hwloc's order: sorting by core id
    # (as a naive reader would) numbers slots differently from OpenMPI.
    package = parse("hwloc", "intel-skylake-2x6140.xml").packages[0]
    ids = [core.os_index for core in package.cores]
    assert ids != sorted(ids)
    assert [core.index for core in package.cores] == list(range(18))


def test_hwloc_1x_and_2x_exports_of_one_machine_agree():
    old, new = parse("hwloc", "xeon-2n6c2t-pci.v1.xml"), parse("hwloc", "xeon-2n6c2t-pci.v2.xml")
    assert (old.format_major, new.format_major) == (1, 2)
    assert old.packages == new.packages
    assert old.numa_nodes == new.numa_nodes
    for node, package in zip(old.numa_nodes, old.packages, strict=False):  # 1.x: node above package; 2.x: node inside it
        assert node.pus == tuple(sorted(pu for core in package.cores for pu in core.pus)) and len(node.pus) == 12
    assert old.gpus == new.gpus and len(old.gpus) == 3


def test_several_numa_nodes_per_package():
    topology = parse("hwloc", "amd-epyc-7451-2p.xml")
    assert [package.numa_nodes for package in topology.packages] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert topology.packages[1].cores[0].pus == (24, 72)


def test_minsky_gpus_and_their_package():
    topology = parse("hwloc", "power8-minsky-gpus.xml")
    assert [(gpu.bus_id, gpu.package, gpu.numa_nodes) for gpu in topology.gpus] == [
        ("0002:01:00.0", 0, (0,)),
        ("0003:01:00.0", 0, (0,)),
        ("000a:01:00.0", 1, (1,)),
        ("000b:01:00.0", 1, (1,)),
    ]
    assert topology.gpus[0].names == ("cuda0", "opencl0d0", "nvml0") and topology.gpus[0].device_id == "15f9"


def test_dgx2_sixteen_gpus_eight_per_package():
    gpus = parse("hwloc", "nvidia-dgx2.xml").gpus
    assert len(gpus) == 16 and [gpu.package for gpu in gpus] == [0] * 8 + [1] * 8


def test_hybrid_cpus_have_cpu_kinds():
    assert parse("hwloc", "intel-raptorlake-1370p-hybrid.xml").cpu_kinds == 2
    assert parse("hwloc", "nvidia-dgx-gb10-arm-hybrid.xml").cpu_kinds == 2
    assert parse("hwloc", "intel-skylake-2x6140.xml").cpu_kinds == 0
    threads = [len(core.pus) for core in parse("hwloc", "intel-raptorlake-1370p-hybrid.xml").packages[0].cores]
    assert threads == [2] * 6 + [1] * 8


def test_package_without_os_index_is_kept():
    topology = parse("captures", "power7-lpar-pkg-minus1", "hwloc-xml.txt")
    assert [package.os_index for package in topology.packages] == [None] * 4
    assert [socket.physical_id for socket in hwloc.cpu_topology(topology).sockets] == [-1] * 4


HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'
SMALL = (
    '<topology version="2.0"><object type="Machine" os_index="0"><object type="Package" os_index="0">'
    '<object type="NUMANode" os_index="0"/><object type="Core" os_index="0"><object type="PU" os_index="0"/>'
    "</object></object></object></topology>"
)


def test_minimal_document_with_hwlocs_doctype():
    topology = hwloc.parse_hwloc_xml(HEAD + '<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n' + SMALL)
    assert hwloc.cpu_topology(topology).shape() == "1x1x1"


@pytest.mark.parametrize(
    "text, message",
    [
        (  # billion laughs
            HEAD + '<!DOCTYPE topology [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
            '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><topology>&c;</topology>',
            "internal subset",
        ),
        (HEAD + '<!DOCTYPE topology [<!ENTITY x SYSTEM "file:///etc/passwd">]><topology>&x;</topology>', "internal subset"),
        # An external DTD is never fetched, so its entities stay unexpanded: an empty topology.
        (HEAD + '<!DOCTYPE topology SYSTEM "http://example.invalid/evil.dtd"><topology>&x;</topology>', "one root object"),
        (HEAD + "<topology>&x;</topology>", "not well-formed"),  # undefined entity
        (HEAD + "<topology>" + "<object>" * 100 + "</object>" * 100 + "</topology>", "nested more than"),
        ("<topology/>" + " " * (hwloc.MAX_CHARS + 1), "over the"),
        (HEAD + "<topology><object", "not well-formed"),
        ("", "not well-formed"),
        (SMALL.replace("<topology", "<html").replace("</topology>", "</html>"), "not <topology>"),
        (SMALL.replace('type="PU" os_index="0"', 'type="PU"'), "PU has no os_index"),
        (SMALL.replace('type="PU" os_index="0"', 'type="PU" os_index="\u0663"'), "bad os_index"),
        (SMALL.replace('type="PU" os_index="0"', 'type="PU" os_index="99999999999999999999"'), "bad os_index"),
        (SMALL.replace('<object type="Core" os_index="0">', '<object type="Group">'), "not inside a Core"),
        (SMALL.replace('type="Package" os_index="0"', 'type="Group"'), "not inside a Package"),
        (SMALL.replace('version="2.0"', 'version="x"'), "unknown topology version"),
    ],
)
def test_hostile_or_broken_xml_is_a_parse_error(text, message):
    with pytest.raises(ParseError, match=message) as caught:
        hwloc.parse_hwloc_xml(text)
    assert caught.value.source == "hwloc-xml"


def test_fixtures_listed_in_sources():
    sources = read_fixture("SOURCES.md")
    for path in sorted((FIXTURES / "hwloc").glob("*.xml")):
        assert f"hwloc/{path.name}" in sources
