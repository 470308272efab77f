"""slurm.conf node lines, with the arithmetic of `slurmd -C` (Slurm's xcpuinfo_hwloc_topo_get).

tests/test_slurm_cluster.py compares these lines with the real slurmd -C on a test node.
"""

import dataclasses

from conftest import capture_dir, read_fixture
from plan_support import minsky
from provision.facts.derive import derive_facts
from provision.plans.slurm import slurm_node_line, uneven_note


def test_minsky_line():
    line = slurm_node_line(minsky("sys-89074"))
    assert line == "NodeName=sys-89074 CPUs=160 Boards=1 SocketsPerBoard=2 CoresPerSocket=10 ThreadsPerCore=8 Gres=gpu:4"
    assert uneven_note(minsky("sys-89074")) is None


def test_node_name_is_the_short_host_name():
    facts = dataclasses.replace(minsky("sys-89074"), hostname="sys-89074.cluster.example.com")
    assert slurm_node_line(facts).startswith("NodeName=sys-89074 CPUs=160 ")


def test_mixed_smt_counts_the_threads_as_they_are():
    """A real POWER9 LPAR: core 0 runs 4 threads, core 1 all 8 (12 CPUs, not 1 × 2 × 8 = 16)."""
    captures = {
        "ppc64_cpu-info": read_fixture("outputs", "ppc64_cpu", "ppc64_cpu-info.mixed-smt.txt"),
        "numactl-H": "available: 1 nodes (0)\nnode 0 cpus: 0 1 2 3 8 9 10 11 12 13 14 15\nnode 0 size: 8192 MB\n"
        "node 0 free: 4096 MB\nnode distances:\nnode   0 \n  0:  10 \n",
        "uname-m": "ppc64le\n",
        "hostname": "lpar7.example.com\n",
        "meminfo": "MemTotal:        8388608 kB\n",
    }
    facts = derive_facts("lpar7", captures)
    assert slurm_node_line(facts) == (
        "NodeName=lpar7 CPUs=12 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=6 RealMemory=8192"
    )
    assert "cores run 4/8 threads" in uneven_note(facts)


def test_uneven_sockets_count_every_usable_core():
    """The seed's Minsky with cores 8 and 9 of chip 1 offline: 10 + 8 cores, SMT8 = 144 CPUs (not 2 × 8 × 8)."""
    info = capture_dir("minsky")["ppc64_cpu-info"].splitlines()
    kept = [line.replace("*", "") if int(line.split()[1].rstrip(":")) in (18, 19) else line for line in info]
    captures = {**capture_dir("minsky"), "ppc64_cpu-info": "\n".join(kept) + "\n"}
    facts = derive_facts("minsky", captures)
    assert facts.cpu.shape() == "2x10/8x8"
    assert slurm_node_line(facts) == "NodeName=minsky CPUs=144 Boards=1 SocketsPerBoard=2 CoresPerSocket=9 ThreadsPerCore=8"
    assert "sockets hold 10/8 cores" in uneven_note(facts)
