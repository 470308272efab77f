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


# --- Grace (tests/fixtures/SOURCES.md, "Grace machines") ---


def test_gh200_one_grace_node_and_eight_memory_only_gpu_nodes():
    # The numactl --hardware of Linux commit 63db8170bf34: CPUs 0-71 on node 0, the GPU's 97280 MB
    # on node 1, nodes 2-8 empty; a 9x9 distance table with values up to 255.
    numa = parse_numactl_hardware(read_fixture("captures", "gh200-fakenuma-mail", "numactl-H.txt"))
    assert [n.node_id for n in numa.nodes] == list(range(9))
    assert [n.node_id for n in numa.nodes_with_cpus()] == [0]
    assert numa.nodes[0].cpus == tuple(range(72)) and numa.nodes[0].size_mb == 490037
    assert [(n.cpus, n.size_mb) for n in numa.nodes[1:3]] == [((), 97280), ((), 0)]


def test_a_copy_whose_cpus_line_was_wrapped_is_refused_not_read_as_21_cpus():
    # The same output as the mail carries it: "21 22 ... 42" on a line of its own. Read as part of
    # the distance table (as this parser did before), node 0 would hold 21 CPUs and 51 would vanish.
    with pytest.raises(ParseError, match=r"numactl-H.*line 3: unexpected line '21 22 23"):
        parse_numactl_hardware(read_fixture("outputs", "numactl", "gh200-fake-numa-as-mailed.txt"))


def test_a_size_numactl_cannot_read_is_unknown_not_an_error():
    # numactl.c fmt_mem(): "<not available>" when numa_node_size64() gives -1.
    text = "available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 0 size: 100 MB\nnode 1 cpus:\nnode 1 size: <not available>\n"
    numa = parse_numactl_hardware(text + "node 1 free: <not available>\nNo distance information available.\n")
    assert [n.size_mb for n in numa.nodes] == [100, None]
