"""Property tests over the NIC parsers: facts or their own ParseError, never anything else; what
they accept round-trips; corrupted real captures never crash derive."""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import capture_dir, read_fixture
from provision.errors import ParseError
from provision.facts.derive import derive_facts
from provision.facts.nic_distance import gpu_nic_links
from provision.facts.nics import parse_sysfs_net, parse_sysfs_rdma
from provision.facts.topo_matrix import parse_gpu_nic_matrix

REAL = {
    "sysfs-rdma": read_fixture("captures", "hwloc-32em64t-mlx4", "sysfs-rdma.txt"),
    "sysfs-net": read_fixture("captures", "hwloc-40intel64-qib", "sysfs-net.txt"),
    "nvidia-smi-topo": read_fixture("captures", "epyc-8gpu-10nic", "nvidia-smi-topo.txt"),
    "roce": read_fixture("handwritten", "roce-2port", "sysfs-rdma.txt"),
}
PARSERS = [parse_sysfs_rdma, parse_sysfs_net, parse_gpu_nic_matrix]
FRAGMENTS = st.sampled_from(
    [
        "/sys/class/infiniband/mlx5_0/",
        "/sys/class/net/eth0/",
        "ports/1/",
        "state:",
        "4: ACTIVE",
        "gids/0:",
        "gid_attrs/types/0:",
        "gid_attrs/ndevs/1:",
        "RoCE v2",
        "fe80:0000:0000:0000:0e42:a1ff:fe5e:10b2",
        "device/uevent:PCI_SLOT_NAME=0000:3b:00.0",
        "mtu:",
        "speed:",
        "-1",
        "99999999999",
        "\tGPU0\tNIC0\tCPU Affinity",
        "GPU0\t X \tPIX\t0-7\t0",
        "NIC Legend:",
        "  NIC0: mlx5_0",
        "\x1b[4m",
        "\t",
        "\n",
        ":",
        " ",
        "$(reboot)",
    ]
)
TEXT = st.one_of(st.text(max_size=300), st.lists(FRAGMENTS, max_size=60).map("".join))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT)
def test_every_nic_parser_returns_or_raises_parse_error(text):
    for parse in PARSERS:
        with contextlib.suppress(ParseError):
            parse(text)


@settings(max_examples=200)
@given(st.sampled_from(sorted(REAL)), st.data())
def test_corrupted_real_outputs_never_crash_a_parser(name, data):
    text = REAL[name]
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.text(max_size=40))
    corrupted = text[:cut] + junk + text[cut + len(junk) :]
    for parse in PARSERS:
        with contextlib.suppress(ParseError):
            parse(corrupted)


NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
GIDS = st.lists(st.integers(0, 0xFFFF), min_size=8, max_size=8).map(lambda parts: ":".join(f"{p:04x}" for p in parts))


@settings(max_examples=150)
@given(
    st.dictionaries(
        NAMES,
        st.tuples(
            st.sampled_from(["4: ACTIVE", "1: DOWN", "2: INIT"]),
            st.sampled_from(["InfiniBand", "Ethernet"]),
            st.lists(GIDS, max_size=5),
        ),
        max_size=5,
    )
)
def test_what_sysfs_says_is_what_the_parser_gives(devices):
    lines = []
    for name, (state, layer, gids) in devices.items():
        lines += [
            f"/sys/class/infiniband/{name}/ports/1/state:{state}",
            f"/sys/class/infiniband/{name}/ports/1/link_layer:{layer}",
        ]
        lines += [f"/sys/class/infiniband/{name}/ports/1/gids/{i}:{gid}" for i, gid in enumerate(gids)]
    parsed = {d.name: d.ports[0] for d in parse_sysfs_rdma("\n".join(lines))}
    assert sorted(parsed) == sorted(devices)
    for name, (state, layer, gids) in devices.items():
        port = parsed[name]
        assert (port.state, port.link_layer) == (state.split(": ")[1], layer)
        kept = [(i, g) for i, g in enumerate(gids) if not g.endswith(":0000:0000:0000:0000")]
        assert [(g.index, g.gid) for g in port.gids] == kept


@settings(max_examples=100)
@given(st.data())
def test_derive_with_corrupted_nic_captures_never_crashes(data):
    captures = capture_dir("node-container") | {"sysfs-rdma": REAL["roce"], "nvidia-smi-topo": REAL["nvidia-smi-topo"]}
    name = data.draw(st.sampled_from(["sysfs-rdma", "sysfs-net", "nvidia-smi-topo"]))
    text = captures.get(name, "")
    cut = data.draw(st.integers(0, len(text)))
    captures[name] = text[:cut] + data.draw(st.text(max_size=40))
    with contextlib.suppress(ParseError):
        facts = derive_facts("n", captures)
        gpu_nic_links(facts.gpus, facts.rdma, None, captures["nvidia-smi-topo"], [])
