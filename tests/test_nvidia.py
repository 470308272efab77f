"""nvidia-smi parsers on real captures (AC922, 4-GPU x86)."""

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
        (parse_sysfs_gpu, "0000:04:00.0\n"),
    ],
)
def test_bad_outputs(call, text):
    with pytest.raises(ParseError):
        call(text)


def test_bus_id_forms():
    assert normalise_bus_id("00000000:3B:00.0", "x") == "0000:3b:00.0"
    assert normalise_bus_id("3b:00.0", "x") == "0000:3b:00.0"
