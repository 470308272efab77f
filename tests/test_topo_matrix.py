"""The GPU↔NIC cells of real `nvidia-smi topo -m` outputs: NIC legend, old header names, ANSI, cut rows."""

from __future__ import annotations

import pytest

from conftest import read_fixture
from provision.errors import ParseError
from provision.facts.topo_matrix import parse_gpu_nic_matrix

EPYC = read_fixture("captures", "epyc-8gpu-10nic", "nvidia-smi-topo.txt")
AC922 = read_fixture("captures", "ac922", "nvidia-smi-topo.txt")


def test_nic_legend_maps_nic_columns_to_devices():
    links = parse_gpu_nic_matrix(EPYC)
    assert len(links) == 8 * 10
    near = {gpu: sorted(d for (g, d), c in links.items() if g == gpu and c == "PXB") for gpu in range(8)}
    assert near == {gpu: [f"mlx5_{gpu // 2 * 2}", f"mlx5_{gpu // 2 * 2 + 1}"] for gpu in range(8)}
    assert links[(0, "mlx5_8")] == "SYS" and links[(7, "mlx5_9")] == "SYS"


def test_old_drivers_name_the_devices_in_the_header():
    links = parse_gpu_nic_matrix(AC922)
    assert links[(0, "mlx5_0")] == "NODE" and links[(0, "mlx5_2")] == "SYS" and links[(3, "mlx5_5")] == "NODE"
    assert len(links) == 4 * 6


def test_ansi_underline_and_spaces_instead_of_tabs_read_the_same():
    underlined = EPYC.replace("\tGPU0", "\x1b[4m\tGPU0", 1).replace("NUMA Affinity\n", "NUMA Affinity\x1b[0m\n", 1)
    assert parse_gpu_nic_matrix(underlined) == parse_gpu_nic_matrix(EPYC)
    pasted = EPYC.replace("\t", "    ")  # as copied into a ticket
    assert parse_gpu_nic_matrix(pasted) == parse_gpu_nic_matrix(EPYC)


def test_a_matrix_without_nics_has_no_links():
    assert parse_gpu_nic_matrix(read_fixture("captures", "delos-x86-4gpu", "nvidia-smi-topo.txt")) == {}


@pytest.mark.parametrize(
    "broken, says",
    [
        (EPYC.replace("\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\t80-95,208-223\t5\nGPU7", "\nGPU7"), "GPU6 row has"),
        ("".join(line for line in EPYC.splitlines(keepends=True) if not line.startswith("GPU5\t")), "no GPU5 row"),
        (EPYC.replace("  NIC9: mlx5_9\n", ""), "NIC9 has no entry in the NIC Legend"),
        (EPYC.replace("  NIC9: mlx5_9", "  NIC9: mlx5;reboot"), "bad device name"),
        (
            EPYC.replace(
                "\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t48-63",
                "\tPXB\tFAST\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t48-63",
                1,
            ),
            "FAST",
        ),
        ("nothing here\n", "no header"),
    ],
)
def test_broken_output_is_refused_naming_what(broken, says):
    with pytest.raises(ParseError, match=says):
        parse_gpu_nic_matrix(broken)
