"""numactl -H parser on real captured outputs."""

import pytest

from conftest import read_fixture
from provision.errors import ParseError
from provision.facts.numactl import parse_numactl_hardware


def test_minsky_seed_two_nodes_of_80_cpus():
    numa = parse_numactl_hardware(read_fixture("captures", "minsky", "numactl-H.txt"))
    assert [n.node_id for n in numa.nodes] == [0, 1]
    assert [len(n.cpus) for n in numa.nodes] == [80, 80]
    assert numa.nodes[1].cpus[0] == 80 and numa.nodes[0].size_mb == 261788


def test_ac922_memory_only_gpu_nodes_are_not_cpu_nodes():
    numa = parse_numactl_hardware(read_fixture("captures", "ac922", "numactl-H.txt"))
    assert [n.node_id for n in numa.nodes] == [0, 8, 252, 253, 254, 255]
    assert [n.node_id for n in numa.nodes_with_cpus()] == [0, 8]
    assert numa.node_of_cpu()[64] == 8


def test_interleaved_hyperthread_numbering():
    numa = parse_numactl_hardware(read_fixture("captures", "delos-x86-4gpu", "numactl-H.txt"))
    assert numa.node_of_cpu()[40] == 0 and numa.node_of_cpu()[20] == 1


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "no 'available"),
        ("available: 2 nodes (0-1)\nnode 0 cpus: 0 1\n", "no 'cpus:' line for node(s) [1]"),
        ("available: 3 nodes (0-1)\n", "says 3 nodes but lists 2"),
        ("available: 1 nodes (0)\nnode 0 cpus: 0 x\n", "non-numeric CPU"),
        ("available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 1 cpus: 1\n", "CPU 1 listed on nodes 0 and 1"),
        ("available: 1 nodes (0)\nnode 0 cpus: 0\nGARBAGE here\n", "line 3"),
    ],
)
def test_bad_output_raises_clear_error(text, message):
    with pytest.raises(ParseError, match="numactl-H") as error:
        parse_numactl_hardware(text)
    assert message in str(error.value)
