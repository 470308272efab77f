"""nvidia-smi parsers on real captures (AC922, 4-GPU x86, GH200, GB200)."""

import hashlib

import pytest

from conftest import read_fixture
from provision.errors import ParseError
from provision.facts.nvidia import normalise_bus_id, parse_gpu_query, parse_sysfs_gpu, parse_topo_matrix


def test_ac922_topo_numa_affinity_with_nic_columns():
    rows = parse_topo_matrix(read_fixture("captures", "ac922", "nvidia-smi-topo.txt"))
    assert [(r.index, r.numa_node) for r in rows] == [(0, 0), (1, 0), (2, 8), (3, 8)]
    assert rows[2].cpus == tuple(range(64, 128))


def test_x86_topo_split_cpu_ranges():
    rows = parse_topo_matrix(read_fixture("captures", "delos-x86-4gpu", "nvidia-smi-topo.txt"))
    assert rows[0].cpus == tuple(range(0, 20)) + tuple(range(40, 60))
    assert rows[3].numa_node == 1


def test_topo_header_with_ansi_underline_and_no_numa_column():
    text = "\x1b[4m\tGPU0\tGPU1\tCPU Affinity\x1b[0m\nGPU0\t X \tNV2\t0-79\nGPU1\tNV2\t X \t80-159\n"
    rows = parse_topo_matrix(text)
    assert [(r.index, r.numa_node, r.cpus[0]) for r in rows] == [(0, None, 0), (1, None, 80)]


def test_query_csv():
    text = "0, Tesla P100-SXM2-16GB, 00000002:01:00.0, 16280 MiB\n1, Tesla P100-SXM2-16GB, 00000003:01:00.0, 16280 MiB\n"
    gpus = parse_gpu_query(text)
    assert gpus[1].bus_id == "0003:01:00.0" and gpus[0].memory_mib == 16280


def test_sysfs_gpu_unknown_node():
    assert parse_sysfs_gpu("0000:04:00.0 -1\n0000:84:00.0 1\n") == {"0000:04:00.0": None, "0000:84:00.0": 1}


@pytest.mark.parametrize(
    "call, text",
    [
        (parse_gpu_query, "0, name\n"),
        (parse_gpu_query, "x, a, 0000:01:00.0, 1 MiB\n"),
        (parse_gpu_query, "0, a, zz:01, 1 MiB\n"),
        (parse_topo_matrix, "nothing useful\n"),
        (parse_topo_matrix, "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-3\tzero\n"),
        (parse_topo_matrix, "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-3\t0\t\t2,3\n"),
        (parse_topo_matrix, "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-3\t0-99999\n"),
        (parse_sysfs_gpu, "0000:04:00.0\n"),
    ],
)
def test_bad_outputs(call, text):
    with pytest.raises(ParseError):
        call(text)


def test_bus_id_forms():
    assert normalise_bus_id("00000000:3B:00.0", "x") == "0000:3b:00.0"
    assert normalise_bus_id("3b:00.0", "x") == "0000:3b:00.0"


# --- Grace: GH200 and GB200 (tests/fixtures/SOURCES.md, "Grace machines") ---


def test_gb200_tray_numa_affinity_lists_the_grace_node_and_gpu_memory_nodes():
    # Current drivers: "0,3-9,11-17" is Grace node 0 and the memory-only nodes near it; GPU NUMA ID
    # is the GPU's own memory node. Which listed node holds CPUs is derive's business (numactl, lscpu).
    rows = parse_topo_matrix(read_fixture("captures", "gb200-nvl-tray", "nvidia-smi-topo.txt"))
    assert [r.index for r in rows] == [0, 1, 2, 3]
    assert [r.cpus for r in rows] == [tuple(range(72))] * 2 + [tuple(range(72, 144))] * 2
    assert rows[0].numa_nodes == (0, *range(3, 10), *range(11, 18)) and rows[1].numa_nodes == rows[0].numa_nodes
    assert rows[2].numa_nodes == (1, *range(19, 26), *range(27, 34))
    assert [r.gpu_numa_id for r in rows] == [2, 10, 18, 26]
    assert [r.numa_node for r in rows] == [None] * 4  # a list names no single node


def test_gh200_older_driver_one_node_and_a_gpu_numa_id_in_a_copy_without_tabs():
    rows = parse_topo_matrix(read_fixture("captures", "gh200-aerial", "nvidia-smi-topo.txt"))
    assert [(r.index, r.cpus, r.numa_node, r.numa_nodes, r.gpu_numa_id) for r in rows] == [(0, tuple(range(72)), 0, (0,), 1)]


def test_gb200_container_exact_bytes_with_an_empty_cpu_affinity_cell():
    text = read_fixture("captures", "gb200-container", "nvidia-smi-topo.txt")
    # the hash its publisher's own test asserts: these are the captured bytes
    assert hashlib.sha256(text.encode()).hexdigest() == "cca8b1e86930da4776987fdd3fe8160e6e3093342c4c99a9a030cfd9c5b29999"
    rows = parse_topo_matrix(text)
    assert [(r.cpus, r.numa_node, r.gpu_numa_id) for r in rows] == [(tuple(range(36)), 0, None)] * 2 + [((), 1, None)] * 2


def test_a_copy_without_tabs_that_lost_an_empty_cell_is_refused_naming_the_row():
    # Spaces cannot hold an empty cell: with the container's empty CPU Affinity gone, "1" would
    # read as GPU2's CPUs. Refused instead (derive then uses the host's other sources).
    pasted = read_fixture("captures", "gb200-container", "nvidia-smi-topo.txt").replace("\t", "    ")
    with pytest.raises(ParseError, match=r"line 4: GPU2 row has 2 affinity cells for 3 columns"):
        parse_topo_matrix(pasted)


@pytest.mark.parametrize("name", ["ac922", "delos-x86-4gpu", "epyc-8gpu-10nic"])
def test_tab_captures_without_empty_cells_read_the_same_with_spaces(name):
    text = read_fixture("captures", name, "nvidia-smi-topo.txt")
    assert "\t" in text
    assert parse_topo_matrix(text.replace("\t", "    ")) == parse_topo_matrix(text)
