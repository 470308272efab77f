"""Deriving facts from whole captures: the issue's topology cases."""

import pytest

from conftest import capture_dir, read_fixture
from provision.errors import ParseError
from provision.facts.derive import derive_facts


def power_info(cores: int, threads: int, online: int = None, first_cpu: int = 0, first_core: int = 0) -> str:
    """`ppc64_cpu --info` in its real padded layout (`Core %3d:` + `%4d%c `)."""
    online = threads if online is None else online
    lines = []
    for core in range(cores):
        cells = "".join(f"{first_cpu + core * threads + t:4d}{'*' if t < online else ' '} " for t in range(threads))
        lines.append(f"Core {first_core + core:3d}:{cells}")
    return "\n".join(lines) + "\n"


def test_minsky_seed_two_sockets_of_ten_cores_smt8():
    facts = derive_facts("minsky", capture_dir("minsky"))
    assert facts.cpu.shape() == "2x10x8"
    assert [[c.index for c in s.cores] for s in facts.cpu.sockets] == [list(range(10))] * 2
    assert facts.cpu.sockets[1].cores[0].core_id == 10  # relative numbering, not the global core id
    assert facts.cpu.source == "ppc64_cpu-info+numactl-H"
    assert facts.openmpi.version == "2.0.1"


def test_ac922_memory_only_gpu_nodes_give_two_sockets_not_six():
    captures = capture_dir("ac922")
    # The AC922's real numactl -H and topo -m; its ppc64_cpu --info is built in the real padded
    # layout for 2 chips x 16 cores x SMT4 (64 CPUs per node), since no capture of it was published.
    captures["ppc64_cpu-info"] = power_info(32, 4)
    captures["uname-m"] = "ppc64le\n"
    captures["nvidia-smi-query"] = "".join(f"{i}, Tesla V100-SXM2-16GB, 0000000{4 + i}:04:00.0, 16160 MiB\n" for i in range(4))
    facts = derive_facts("ac922", captures)
    assert facts.cpu.socket_count == 2
    assert [s.physical_id for s in facts.cpu.sockets] == [0, 8]
    assert facts.cpu.shape() == "2x16x4"
    assert [g.socket for g in facts.gpus] == [0, 0, 1, 1]
    assert {g.affinity_source for g in facts.gpus} == {"nvidia-smi-topo"}
    assert any("4 memory-only NUMA node(s)" in n for n in facts.notes)


def test_smt_off_and_offline_core_is_not_usable():
    numa = "available: 1 nodes (0)\nnode 0 cpus: 0 1 8 9 12\nnode 0 size: 100 MB\n"
    info = (
        "Core   0:    0*    1*    2     3 \n"
        "Core   1:    4     5     6     7 \n"  # no online thread: not usable
        "Core   2:    8*    9*   10    11 \n"
        "Core   3:   12*   13    14    15 \n"
    )
    facts = derive_facts("p9", {"numactl-H": numa, "ppc64_cpu-info": info, "uname-m": "ppc64le"})
    socket = facts.cpu.sockets[0]
    assert [(c.index, c.core_id, c.cpus) for c in socket.cores] == [(0, 0, (0, 1)), (1, 2, (8, 9)), (2, 3, (12,))]
    assert facts.cpu.offline_cores == 1 and facts.cpu.threads_per_core == 2
    assert any("no online thread" in n for n in facts.notes)


def test_epyc_several_numa_nodes_per_socket_sockets_from_lscpu():
    facts = derive_facts("epyc", capture_dir("epyc7451"))
    assert facts.cpu.shape() == "2x24x2"
    assert facts.cpu.sockets[0].numa_nodes == (0, 1, 2, 3)
    assert facts.cpu.sockets[1].cores[0].cpus == (24, 72)
    assert any("8 NUMA nodes with CPUs on 2 socket(s)" in n for n in facts.notes)


def test_x86_hyperthreads_and_gpu_affinity_from_topo():
    captures = capture_dir("delos-x86-4gpu")
    # lscpu -p built to match delos's real numactl -H (HT siblings n and n+40); no capture was published.
    rows = [f"{cpu},{cpu % 40 if cpu < 80 else 0},{(cpu % 40) // 20},{(cpu % 40) // 20}" for cpu in range(80)]
    captures["lscpu-p"] = "# CPU,Core,Socket,Node\n" + "\n".join(rows) + "\n"
    captures["nvidia-smi-query"] = "".join(f"{i}, Tesla V100-SXM2-32GB, 00000000:{i + 1:02x}:00.0, 32510 MiB\n" for i in range(4))
    facts = derive_facts("delos", captures)
    assert facts.cpu.shape() == "2x20x2"
    assert facts.cpu.sockets[0].cores[0].cpus == (0, 40)
    assert [g.socket for g in facts.gpus] == [0, 0, 1, 1]


def test_vm_one_socket():
    facts = derive_facts("vm", capture_dir("vm-x86"))
    assert facts.cpu.socket_count == 1 and facts.arch == "x86_64" and facts.gpus == ()


def test_container_capture():
    facts = derive_facts("node", capture_dir("node-container"))
    assert facts.cpu.socket_count >= 1 and facts.openmpi.major == 4


def test_sysfs_fallback_and_gpu_numa_from_sysfs():
    captures = {
        "sysfs-cpu": "0,0,0,0\n1,1,0,0\n2,0,1,1\n3,1,1,1\n",
        "nvidia-smi-query": "0, A100, 00000000:81:00.0, 40960 MiB\n",
        "sysfs-gpu": "0000:81:00.0 1\n",
        "uname-m": "x86_64\n",
    }
    facts = derive_facts("old", captures)
    assert facts.cpu.source == "sysfs-cpu" and facts.cpu.shape() == "2x2x1"
    assert facts.gpus[0].socket == 1 and facts.gpus[0].affinity_source == "sysfs-gpu"


def test_unknown_gpu_affinity_is_noted():
    captures = capture_dir("vm-x86")
    captures["nvidia-smi-query"] = "0, T4, 00000000:00:04.0, 15360 MiB\n"
    facts = derive_facts("vm", captures)
    assert facts.gpus[0].socket is None and any("affinity unknown" in n for n in facts.notes)


def test_no_topology_source_is_an_error():
    with pytest.raises(ParseError, match="no core topology"):
        derive_facts("x", {"hostname": "x\n"})


def test_garbage_in_a_source_another_replaces_is_a_note_naming_it():
    # vm-x86 has lscpu -p and sysfs: an unreadable numactl -H costs nothing but its note.
    captures = capture_dir("vm-x86")
    captures["numactl-H"] = "segmentation fault\n"
    facts = derive_facts("vm", captures)
    assert facts.cpu.source == "lscpu-p" and facts.cpu.socket_count == 1
    assert any(n.startswith("numactl-H not used: cannot parse `numactl-H` output line 1") for n in facts.notes)


def test_garbage_in_a_source_nothing_replaces_names_the_command():
    # On POWER numactl -H is what tells the sockets (the seed's Minsky has no lscpu -p): no other source answers.
    captures = capture_dir("minsky")
    captures["numactl-H"] = "segmentation fault\n"
    with pytest.raises(ParseError, match="numactl-H"):
        derive_facts("minsky", captures)


# --- hwloc first; hybrid CPUs and package id -1 without it (issue 11) ---


def test_hwloc_xml_is_the_topology_when_captured():
    facts = derive_facts("node", capture_dir("node-hwloc"))
    assert facts.cpu.source == "hwloc-xml" and facts.cpu.shape() == "1x2x1"
    assert facts.notes == ()  # lscpu-p, sysfs-cpu and numactl-H agree with hwloc here


def test_hwloc_numbering_wins_and_the_difference_is_noted():
    # The real EPYC 7451 lscpu -p (util-linux) with an hwloc export whose cores are in another order.
    captures = capture_dir("epyc7451")
    captures["hwloc-xml"] = read_fixture("hwloc", "intel-skylake-2x6140.xml")
    facts = derive_facts("mixed", captures)
    assert facts.cpu.source == "hwloc-xml" and facts.cpu.shape() == "2x18x2"
    assert any("lscpu-p reads 2x24x2 but hwloc-xml reads 2x18x2; used hwloc-xml" in n for n in facts.notes)


def test_same_machine_type_lscpu_and_hwloc_agree():
    captures = capture_dir("epyc7451")
    captures["hwloc-xml"] = read_fixture("hwloc", "amd-epyc-7451-2p.xml")
    facts = derive_facts("epyc", captures)
    assert facts.cpu.source == "hwloc-xml" and facts.cpu.sockets[0].numa_nodes == (0, 1, 2, 3)
    assert not any("used hwloc-xml" in n for n in facts.notes)


def test_unusable_hwloc_xml_is_noted_and_the_other_sources_used():
    captures = capture_dir("node-hwloc")
    captures["hwloc-xml"] = captures["hwloc-xml"][:500]
    facts = derive_facts("node", captures)
    assert facts.cpu.source == "lscpu-p" and any(n.startswith("hwloc-xml not used: cannot parse") for n in facts.notes)


def test_hybrid_arm_phone_with_hwloc():
    facts = derive_facts("phone", capture_dir("arm-hybrid-a510-x3"))
    assert facts.cpu.source == "hwloc-xml" and facts.cpu.total_cpus == 8
    assert [len(s.cores) for s in facts.cpu.sockets] == [3, 4, 1] and facts.cpu.threads_per_core == 1
    assert any("hybrid CPU: hwloc-xml lists 3 kinds" in n for n in facts.notes)


def test_hybrid_arm_phone_without_hwloc_is_not_1x3x4():
    captures = capture_dir("arm-hybrid-a510-x3")
    del captures["hwloc-xml"]
    facts = derive_facts("phone", captures)
    # lscpu -p alone gives 1x3x4 (its CORE restarts per CPU type); sysfs's sibling lists give
    # eight single-thread cores in the packages hwloc sees.
    assert facts.cpu.source == "sysfs-cpu" and facts.cpu.shape() == "3x3/4/1x1" and facts.cpu.total_cpus == 8
    assert any("lscpu-p groups CPUs into cores or sockets differently" in n for n in facts.notes)


@pytest.mark.parametrize("name, shape", [("power7-lpar-pkg-minus1", "4x1x4"), ("sparc64-pkg-minus1", "6x1x1")])
def test_package_id_minus_one_from_sysfs_alone(name, shape):
    captures = {"sysfs-cpu": capture_dir(name)["sysfs-cpu"]}
    facts = derive_facts(name, captures)
    assert facts.cpu.source == "sysfs-cpu" and facts.cpu.shape() == shape
    with_hwloc = derive_facts(name, {**captures, "hwloc-xml": capture_dir(name)["hwloc-xml"]})
    assert with_hwloc.cpu.shape() == shape and with_hwloc.notes == ()


def test_gpu_socket_from_hwloc_locality():
    captures = {"hwloc-xml": read_fixture("hwloc", "power8-minsky-gpus.xml"), "uname-m": "ppc64le\n"}
    captures["nvidia-smi-query"] = "".join(
        f"{i}, Tesla P100-SXM2-16GB, 0000{domain}:01:00.0, 16280 MiB\n"
        for i, domain in enumerate(["0002", "0003", "000A", "000B"])
    )
    facts = derive_facts("minsky", captures)
    assert [(g.socket, g.numa_node, g.affinity_source) for g in facts.gpus] == [(0, 0, "hwloc-xml")] * 2 + [
        (1, 1, "hwloc-xml")
    ] * 2


def test_gpus_in_hwloc_but_no_nvidia_smi_is_noted():
    facts = derive_facts("dgx2", {"hwloc-xml": read_fixture("hwloc", "nvidia-dgx2.xml")})
    assert facts.gpus == () and any("hwloc-xml shows 16 NVIDIA GPU(s)" in n for n in facts.notes)


def test_core_order_differing_from_hwloc_is_noted():
    # lscpu -p rows built from the real Skylake export, but with each package's cores numbered by
    # their OS core id (the order a reader sorting by core id gets): same shape, other slots.
    from provision.facts import hwloc

    xml = read_fixture("hwloc", "intel-skylake-2x6140.xml")
    rows = [
        f"{pu},{core.os_index},{package.logical_index},0"
        for package in hwloc.parse_hwloc_xml(xml).packages
        for core in package.cores
        for pu in core.pus
    ]
    facts = derive_facts("skl", {"lscpu-p": "\n".join(sorted(rows, key=lambda r: int(r.split(",")[0]))) + "\n", "hwloc-xml": xml})
    assert facts.cpu.source == "hwloc-xml" and facts.cpu.shape() == "2x18x2"
    assert any("lscpu-p numbers cores differently from hwloc-xml (socket 0 core" in n for n in facts.notes)


def test_power_host_with_every_thread_offline_is_a_parse_error_not_a_crash():
    numa = "available: 1 nodes (0)\nnode 0 cpus:\nnode 0 size: 100 MB\n"
    facts_input = {"numactl-H": numa, "ppc64_cpu-info": power_info(4, 8, online=0), "uname-m": "ppc64le\n"}
    with pytest.raises(ParseError, match="ppc64_cpu-info.*none of the 4 core"):
        derive_facts("p8", facts_input)


def test_numactl_claiming_a_hundred_million_nodes_is_refused_at_once():
    captures = capture_dir("vm-x86")
    captures["numactl-H"] = "available: 100000000 nodes (0-99999999)\nnode 0 cpus: 0 1\n"
    facts = derive_facts("vm", captures)  # refused at its first line, not expanded; lscpu -p answers
    assert any(n.startswith("numactl-H not used:") and "beyond 65536" in n for n in facts.notes)


@pytest.mark.parametrize(
    "name, text, replaced",
    [
        ("lscpu-p", "²,0,0,0\n", True),  # sysfs-cpu answers instead
        ("lscpu-p", "1" * 5000 + ",0,0,0\n", True),
        ("numactl-H", "available: 1 nodes (0)\nnode 0 cpus: 0 ²\n", True),  # lscpu -p answers instead
        ("nvidia-smi-query", "², T4, 00000000:00:04.0, 15360 MiB\n", False),  # nothing else lists the GPUs
        ("meminfo", "MemTotal: " + "9" * 5000 + " kB\n", False),
    ],
)
def test_digits_that_int_refuses_are_parse_errors(name, text, replaced):
    captures = capture_dir("vm-x86")
    captures[name] = text
    if replaced:
        facts = derive_facts("vm", captures)
        assert facts.cpu.total_cpus == 2 and any(n.startswith(f"{name} not used: cannot parse `{name}`") for n in facts.notes)
        return
    with pytest.raises(ParseError, match=name):
        derive_facts("vm", captures)


# `nvidia-smi topo -m` of a 2-socket VM with NUMA not exposed (8 GPUs on one PCIe root): every
# GPU's CPU Affinity is all 80 CPUs and its NUMA Affinity N/A.
VM_TOPO = (
    "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tPHB\t0-79\tN/A\t\tN/A\n"
    "GPU1\tPHB\t X \t0-79\tN/A\t\tN/A\n"
    "\n"
    "Legend:\n\n"
    "  X    = Self\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
)


def vm_two_sockets_two_gpus() -> dict[str, str]:
    rows = [f"{cpu},{cpu},{cpu // 40}," for cpu in range(80)]  # NUMA off: empty node column
    return {
        "uname-m": "x86_64\n",
        "lscpu-p": "# CPU,Core,Socket,Node\n" + "\n".join(rows) + "\n",
        "nvidia-smi-query": "0, Tesla V100-PCIE-32GB, 00000000:00:05.0, 32768 MiB\n"
        "1, Tesla V100-PCIE-32GB, 00000000:00:06.0, 32768 MiB\n",
        "nvidia-smi-topo": VM_TOPO,
    }


def test_gpu_affinity_spanning_sockets_is_unknown_not_the_first_cpus_socket():
    facts = derive_facts("vm", vm_two_sockets_two_gpus())
    assert facts.cpu.socket_count == 2
    assert [g.socket for g in facts.gpus] == [None, None]
    assert any("GPU 0" in n and "spans sockets 0,1" in n for n in facts.notes)


def test_gpu_affinity_spanning_sockets_falls_back_to_sysfs_numa_node():
    captures = vm_two_sockets_two_gpus()
    captures["lscpu-p"] = "".join(f"{cpu},{cpu},{cpu // 40},{cpu // 40}\n" for cpu in range(80))
    captures["sysfs-gpu"] = "0000:00:05.0 1\n0000:00:06.0 -1\n"
    facts = derive_facts("vm", captures)
    assert (facts.gpus[0].socket, facts.gpus[0].affinity_source) == (1, "sysfs-gpu")
    assert facts.gpus[1].socket is None and any("GPU 1" in n and "unknown" in n for n in facts.notes)


def test_gpu_affinity_within_one_socket_still_counts():
    captures = vm_two_sockets_two_gpus()
    captures["nvidia-smi-topo"] = VM_TOPO.replace("GPU1\tPHB\t X \t0-79", "GPU1\tPHB\t X \t40-59,60-79")
    facts = derive_facts("vm", captures)
    assert [g.socket for g in facts.gpus] == [None, 1]
