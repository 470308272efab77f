"""Property tests: every parser returns facts or raises its own ParseError, never anything else."""

import contextlib

from grace_support import gb200, gh200
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import capture_dir, read_fixture
from provision.errors import ParseError
from provision.facts import hwloc
from provision.facts.derive import derive_facts
from provision.facts.registry import discover
from provision.probe.gather import CAPTURE_NAMES

# Every fixed fact of the registry (probe's and doctor's captures, setup-cluster's fixed state),
# each with its parser.
PARSERS = {
    fact.name: fact.parse
    for fact in discover("provision.facts", "provision.operations", "provision.doctor").values()
    if not fact.takes_arg
}

# Text that looks like the real thing: fragments of real outputs, digits, separators.
FRAGMENTS = st.sampled_from(
    [
        "available: 2 nodes (0-1)",
        "node 0 cpus:",
        "Core 0:",
        "0*",
        "#",
        ",",
        "\t",
        "GPU0",
        "CPU Affinity",
        "ii",
        "MiB",
        "-",
        ":",
        " ",
        "\n",
        "0",
        "7",
        "255",
        "x",
        "²",
        "99999999",
        "0-99999999",
        "N/A",
        "\tNUMA Affinity",
        "node 0 size: 7 MB",
        "MemTotal: 9 kB",
        "# ompi_info",
        "ompi:version:full:",
        "\tGPU NUMA ID",
        "0,3-9,11-17",
        "node distances:",
        "  0:  10  80",
    ]
)
TEXT = st.one_of(st.text(max_size=300), st.lists(FRAGMENTS, max_size=60).map("".join))


def test_every_fixed_fact_has_a_parser():
    assert set(CAPTURE_NAMES) <= set(PARSERS) and all(PARSERS.values())


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT)
def test_every_parser_returns_or_raises_parse_error(text):
    for parse in PARSERS.values():
        with contextlib.suppress(ParseError):
            parse(text)


@settings(max_examples=200)
@given(st.sampled_from(["minsky", "vm-x86", "epyc7451", "node-container"]), st.data())
def test_derive_on_corrupted_real_captures(fixture, data):
    captures = capture_dir(fixture)
    name = data.draw(st.sampled_from(sorted(captures)))
    text = captures[name]
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.text(max_size=40))
    captures[name] = text[:cut] + junk + text[cut + len(junk) :]
    with contextlib.suppress(ParseError):
        derive_facts(fixture, captures)


# --- hwloc XML: corrupted real exports, XML bombs, and trees built from hwloc's own pieces ---

HWLOC_FIXTURES = ["power8-minsky-gpus.xml", "xeon-2n6c2t-pci.v1.xml", "intel-raptorlake-1370p-hybrid.xml", "nvidia-dgx2.xml"]
XML_PIECES = st.sampled_from(
    [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
        "<topology>",
        '<topology version="2.0">',
        "</topology>",
        '<object type="Machine" os_index="0">',
        '<object type="Package" os_index="1">',
        '<object type="Socket">',
        '<object type="NUMANode" os_index="0"/>',
        '<object type="Core" os_index="3">',
        '<object type="PU" os_index="7"/>',
        '<object type="PU" os_index="7">',
        '<object type="Group">',
        "</object>",
        '<object type="PCIDev" pci_busid="0000:01:00.0" pci_type="0302 [10de:15f9] [10de:116b] a1">',
        '<object type="OSDev" name="cuda0"/>',
        '<object type="Bridge">',
        "<cpukind/>",
        '<info name="a" value="b"/>',
        '<!DOCTYPE topology [<!ENTITY a "&b;&b;&b;&b;"><!ENTITY b "xxxxxxxx">]>',
        "&a;",
        "&lt;",
        "<![CDATA[x]]>",
        '<!ENTITY e SYSTEM "file:///etc/passwd">',
        "<!-- c -->",
        "\x00",
        "\u00e9",
        "\ud800",
        " ",
        "\n",
    ]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(XML_PIECES, max_size=40).map("".join))
def test_hwloc_parser_on_hwloc_shaped_junk(text):
    with contextlib.suppress(ParseError):
        hwloc.parse_hwloc_xml(text)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(HWLOC_FIXTURES), st.data())
def test_hwloc_parser_on_corrupted_real_exports(name, data):
    text = read_fixture("hwloc", name)
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.one_of(st.text(max_size=40), st.lists(XML_PIECES, max_size=5).map("".join)))
    try:
        topology = hwloc.parse_hwloc_xml(text[:cut] + junk + text[cut + len(junk) :])
    except ParseError:
        return
    hwloc.cpu_topology(topology)  # whatever parses also converts


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["node-hwloc", "arm-hybrid-a510-x3", "power7-lpar-pkg-minus1"]),
    st.sampled_from(["hwloc-xml", "sysfs-cpu"]),
    st.data(),
)
def test_derive_survives_corrupted_hwloc_and_sysfs_captures(fixture, name, data):
    captures = capture_dir(fixture)
    text = captures[name]
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.text(max_size=40))
    captures[name] = text[:cut] + junk + text[cut + len(junk) :]
    try:
        facts = derive_facts(fixture, captures)
    except ParseError:
        assert name == "sysfs-cpu"  # an unusable hwloc-xml is only a note: the other sources remain
        return
    assert facts.cpu.total_cpus > 0


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(CAPTURE_NAMES), TEXT, max_size=len(CAPTURE_NAMES)))
def test_whole_host_derivation_on_arbitrary_captures(captures):
    # Any set of captures a node may send: facts, or a ParseError naming a capture; nothing else.
    try:
        derive_facts("host", captures)
    except ParseError as error:
        assert error.source in CAPTURE_NAMES


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["minsky", "vm-x86", "epyc7451", "node-container", "ac922", "delos-x86-4gpu"]), st.data())
def test_whole_host_derivation_on_real_captures_with_some_replaced_or_dropped(fixture, data):
    captures = capture_dir(fixture)
    for name in data.draw(st.lists(st.sampled_from(CAPTURE_NAMES), max_size=4, unique=True)):
        replacement = data.draw(st.one_of(st.none(), TEXT))
        if replacement is None:
            captures.pop(name, None)
        else:
            captures[name] = replacement
    try:
        derive_facts(fixture, captures)
    except ParseError as error:
        assert error.source in CAPTURE_NAMES


# --- Grace: whatever one source says, a host whose other sources answer is probed ---

GRACE_TOPOS = ["gb200-nvl-tray", "gb200-container", "gh200-aerial"]
CELLS = st.sampled_from(
    ["", "N/A", "0", "1", "0,3-9,11-17", "72-143", "2,x", "-1", "1024", "0-99999", "99999999", "²", " ", "\t"]
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(GRACE_TOPOS), st.data())
def test_topo_parser_on_real_grace_captures_with_a_cell_replaced(name, data):
    from provision.facts.bounds import MAX_NUMA_NODES
    from provision.facts.nvidia import parse_topo_matrix

    lines = read_fixture("captures", name, "nvidia-smi-topo.txt").split("\n")
    rows = [number for number, line in enumerate(lines) if line.startswith("GPU")]
    number = data.draw(st.sampled_from(rows))
    separator = "\t" if "\t" in lines[number] else "    "
    cells = lines[number].split(separator)
    cells[data.draw(st.integers(1, len(cells) - 1))] = data.draw(CELLS)
    lines[number] = separator.join(cells)
    try:
        affinities = parse_topo_matrix("\n".join(lines))
    except ParseError as error:
        assert error.source == "nvidia-smi-topo" and error.line == number + 1  # the row it names
        return
    for row in affinities:
        assert all(0 <= node < MAX_NUMA_NODES for node in row.numa_nodes)
        assert row.gpu_numa_id is None or 0 <= row.gpu_numa_id < MAX_NUMA_NODES


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["gb200-nvl-tray", "gb200-container"]), st.sampled_from(["nvidia-smi-topo", "sysfs-gpu"]), st.data())
def test_a_gb200_host_is_probed_whatever_its_gpu_affinity_sources_say(topo, name, data):
    captures = gb200(topo)
    text = captures.get(name, "")
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.one_of(st.text(max_size=40), st.lists(FRAGMENTS, max_size=8).map("".join)))
    captures[name] = text[:cut] + junk + text[cut + len(junk) :]
    facts = derive_facts("tray", captures)  # never raises: lscpu -p and the GPU list answer
    assert facts.cpu.shape() == "2x72x1" and len(facts.gpus) == 4
    assert all(gpu.socket in (None, 0, 1) for gpu in facts.gpus)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_gh200_host_is_probed_whatever_its_numactl_says(data):
    captures = gh200()
    text = captures["numactl-H"]
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.one_of(st.text(max_size=40), st.lists(FRAGMENTS, max_size=8).map("".join)))
    captures["numactl-H"] = text[:cut] + junk + text[cut + len(junk) :]
    facts = derive_facts("gh200", captures)
    assert facts.cpu.shape() == "1x72x1" and facts.gpus[0].socket == 0  # lscpu -p and topo -m answer
