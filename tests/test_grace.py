"""Grace hosts (GH200, GB200) probed from their published outputs: sockets, cores, each GPU's
socket, rank files, slurm.conf and gres.conf lines.

The real captures are in tests/fixtures/captures/gh200-* and gb200-* (sources in SOURCES.md,
"Grace machines"); the `lscpu -p` and GPU lists no one published are written by hand in
tests/grace_support.py, which says from what.

Every expected value below is worked out by hand from those captures, as each comment says.
"""

from __future__ import annotations

import json

from grace_support import GB200_BUSES, gb200, gh200, grace_lscpu_p, rank_lines

from conftest import read_fixture, run_cli
from provision.facts.derive import derive_facts
from provision.facts.lscpu import parse_lscpu
from provision.facts.topo_matrix import parse_gpu_nic_matrix
from provision.plans.dims import parse_dims
from provision.plans.gres import host_gres
from provision.plans.rankfile import RULE_GPU, plan_rankfile, render_rankfile
from provision.plans.slurm import slurm_node_line

MEMORY_ONLY_NOTE = "numactl-H lists 8 memory-only NUMA node(s) (e.g. GPU memory); not sockets"


# --- one GH200 ---


def test_gh200_one_socket_of_72_cores_and_its_gpu_memory_nodes_are_no_sockets():
    facts = derive_facts("gh200", gh200())
    # numactl -H: node 0 holds CPUs 0-71, nodes 1-8 none -> one socket; lscpu -p: 72 cores, 1 thread.
    assert facts.arch == "aarch64" and facts.cpu.shape() == "1x72x1" and facts.cpu.source == "lscpu-p"
    assert facts.cpu.sockets[0].numa_nodes == (0,)
    assert MEMORY_ONLY_NOTE in facts.notes
    # topo -m: GPU0's NUMA Affinity 0 is the node of socket 0 (its GPU NUMA ID 1 is the memory node).
    assert [(g.socket, g.numa_node, g.affinity_source) for g in facts.gpus] == [(0, 0, "nvidia-smi-topo")]


def test_gh200_slurm_gres_and_rank_file():
    facts = derive_facts("gh200", gh200())
    # 72 CPUs, 1 socket of 72 cores, 1 thread each; the GPU's cores are socket 0's: logical 0-71.
    assert (
        slurm_node_line(facts)
        == "NodeName=gh200 CPUs=72 Boards=1 SocketsPerBoard=1 CoresPerSocket=72 ThreadsPerCore=1 Gres=gpu:1"
    )
    gres = host_gres(facts)
    assert [line.text("gh200") for line in gres.lines] == [
        "NodeName=gh200 Name=gpu Type=nvidia_gh200_480gb File=/dev/nvidia0 Cores=0-71"
    ]
    assert gres.notes == ()
    # One learner per host, two hosts: learner 0 takes its GPU's whole socket (rank_gen: rank = y).
    plan = plan_rankfile(parse_dims("1x2x1"), [facts, derive_facts("gh200b", gh200())])
    assert rank_lines(render_rankfile(plan, "now")) == ["rank 0=gh200 slot=0:0-71", "rank 1=gh200b slot=0:0-71"]


def test_a_vm_guests_lscpu_without_a_socket_count_is_read_and_never_a_socket_source():
    # The Lambda GH200 guest masks /sys/firmware: lscpu prints "Socket(s): -" and "Cluster(s): 1".
    summary = parse_lscpu(read_fixture("captures", "gh200-lambda-vm", "lscpu.txt"))
    assert (summary["Architecture"], summary["Socket(s)"], summary["Cluster(s)"], summary["CPU(s)"]) == (
        "aarch64",
        "-",
        "1",
        "64",
    )
    assert summary["NUMA node(s)"] == "9" and summary["NUMA node1 CPU(s)"] == ""
    # Sockets come from lscpu -p (or sysfs, hwloc), never the summary: with 64 CPUs on one socket
    # in lscpu -p, the host is 1x64x1 whatever the summary says.
    rows = "".join(f"{cpu},{cpu},0,0\n" for cpu in range(64))
    facts = derive_facts("lambda", {"lscpu": read_fixture("captures", "gh200-lambda-vm", "lscpu.txt"), "lscpu-p": rows})
    assert facts.arch == "aarch64" and facts.cpu.shape() == "1x64x1" and facts.notes == ()


# --- a GB200 tray: 2 Grace, 4 GPUs ---


def test_gb200_tray_two_sockets_and_each_gpu_on_its_grace():
    facts = derive_facts("tray", gb200())
    assert facts.cpu.shape() == "2x72x1" and [s.numa_nodes for s in facts.cpu.sockets] == [(0,), (1,)]
    # NUMA Affinity "0,3-9,11-17": of these only node 0 holds CPUs (socket 0); "1,19-25,27-33": node 1.
    # The GPU NUMA IDs 2, 10, 18, 26 are memory-only nodes: never a socket.
    assert [(g.index, g.socket, g.numa_node, g.affinity_source) for g in facts.gpus] == [
        (0, 0, 0, "nvidia-smi-topo"),
        (1, 0, 0, "nvidia-smi-topo"),
        (2, 1, 1, "nvidia-smi-topo"),
        (3, 1, 1, "nvidia-smi-topo"),
    ]
    assert not any("affinity unknown" in note for note in facts.notes)


def test_gb200_tray_without_numa_node_numbers_still_places_each_gpu_by_its_cpu_affinity():
    captures = gb200()
    captures["lscpu-p"] = grace_lscpu_p(2, with_nodes=False)  # no NODE column: no node names a socket
    facts = derive_facts("tray", captures)
    # CPU Affinity 0-71 is all socket 0, 72-143 all socket 1; a list names no single NUMA node.
    assert [(g.socket, g.numa_node) for g in facts.gpus] == [(0, None), (0, None), (1, None), (1, None)]


def test_gb200_tray_slurm_gres_and_rank_file():
    facts = derive_facts("tray01", gb200())
    # 144 CPUs, 2 sockets of 72 cores, 1 thread; Slurm's logical cores: socket 0 is 0-71, socket 1 72-143.
    assert (
        slurm_node_line(facts)
        == "NodeName=tray01 CPUs=144 Boards=1 SocketsPerBoard=2 CoresPerSocket=72 ThreadsPerCore=1 Gres=gpu:4"
    )
    gres = host_gres(facts)
    assert [line.text("tray01") for line in gres.lines] == [
        f"NodeName=tray01 Name=gpu Type=nvidia_gb200 File=/dev/nvidia{gpu} Cores={cores}"
        for gpu, cores in enumerate(("0-71", "0-71", "72-143", "72-143"))
    ]
    assert gres.node_line.endswith("Gres=gpu:nvidia_gb200:4")
    # 4 learners: learner x drives GPU x, on GPU x's socket; two learners share a socket's 72
    # cores as 0-35 and 36-71 (slots are socket-relative core numbers).
    plan = plan_rankfile(parse_dims("4x1x1"), [facts])
    assert plan.hosts[0].rule == RULE_GPU
    assert rank_lines(render_rankfile(plan, "now")) == [
        "rank 0=tray01 slot=0:0-35",
        "rank 1=tray01 slot=0:36-71",
        "rank 2=tray01 slot=1:0-35",
        "rank 3=tray01 slot=1:36-71",
    ]


def test_gb200_tray_nics_all_sys_from_every_gpu():
    # The tray's 8 mlx5 ports hang off neither GPU's PCIe switch: every one of the 32 cells is SYS.
    links = parse_gpu_nic_matrix(read_fixture("captures", "gb200-nvl-tray", "nvidia-smi-topo.txt"))
    assert sorted(links) == [(gpu, f"mlx5_{nic}") for gpu in range(4) for nic in range(8)]
    assert set(links.values()) == {"SYS"}


def test_gb200_in_a_container_gpu_with_no_cpu_in_its_cpuset_is_placed_by_numa_node():
    # The container's cpuset holds CPUs 0-35: GPU2/GPU3's CPU Affinity cell is empty, their NUMA
    # Affinity 1. lscpu -p still lists all 144 online CPUs (it reads sysfs, not the cpuset).
    facts = derive_facts("t01", gb200("gb200-container"))
    assert [(g.socket, g.numa_node) for g in facts.gpus] == [(0, 0), (0, 0), (1, 1), (1, 1)]
    # Without NUMA node numbers nothing tells GPU2/3's socket: unknown, noted, no Cores= for them.
    captures = gb200("gb200-container")
    captures["lscpu-p"] = grace_lscpu_p(2, with_nodes=False)
    facts = derive_facts("t01", captures)
    assert [g.socket for g in facts.gpus] == [0, 0, None, None]
    assert [line.cores for line in host_gres(facts).lines] == ["0-71", "0-71", None, None]
    assert sum("socket affinity unknown" in note for note in facts.notes) == 2


# --- four GH200 in one node (4 sockets) ---

# HAND-WRITTEN topo -m of a 4 x GH200 node in the driver-560 form of the Aerial capture: no text
# of one was found published. Values: NCSA DeltaAI's table re-typing theirs (GPU0: CPU Affinity
# 0-71, NUMA Affinity 0, GPU NUMA ID 4; GPU1: 72-143, 1, 12) and, for GPU2/3, the same pattern
# over the node CPU lists of DCGM's published `lscpu -J` of such a node (144-215, 216-287; 36 nodes:
# 4 Grace + 4 x 8 GPU memory nodes, so GPU NUMA IDs 20 and 28).
QUAD_TOPO = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV6\tNV6\tNV6\t0-71\t0\t\t4\n"
    "GPU1\tNV6\t X \tNV6\tNV6\t72-143\t1\t\t12\n"
    "GPU2\tNV6\tNV6\t X \tNV6\t144-215\t2\t\t20\n"
    "GPU3\tNV6\tNV6\tNV6\t X \t216-287\t3\t\t28\n"
)


def test_quad_gh200_node_four_sockets_one_gpu_each():
    captures = {
        "uname-m": "aarch64\n",
        "lscpu-p": grace_lscpu_p(4),
        "nvidia-smi-topo": QUAD_TOPO,
        "nvidia-smi-query": "".join(f"{i}, NVIDIA GH200 120GB, 000000{i}9:01:00.0, 97871 MiB\n" for i in range(4)),
    }
    facts = derive_facts("nid001", captures)
    assert facts.cpu.shape() == "4x72x1" and [g.socket for g in facts.gpus] == [0, 1, 2, 3]
    assert (
        slurm_node_line(facts)
        == "NodeName=nid001 CPUs=288 Boards=1 SocketsPerBoard=4 CoresPerSocket=72 ThreadsPerCore=1 Gres=gpu:4"
    )
    assert [line.cores for line in host_gres(facts).lines] == ["0-71", "72-143", "144-215", "216-287"]
    plan = plan_rankfile(parse_dims("4x1x1"), [facts])
    assert [slot.slot_text() for slot in plan.slots()] == ["0:0-71", "1:0-71", "2:0-71", "3:0-71"]


# --- one unreadable column costs the host nothing but that source ---


def test_an_unreadable_numa_affinity_cell_is_a_note_and_the_host_still_probes():
    captures = gb200()
    captures["nvidia-smi-topo"] = captures["nvidia-smi-topo"].replace("0,3-9,11-17             10", "0,3-9,11-x             10")
    facts = derive_facts("tray", captures)
    assert facts.cpu.shape() == "2x72x1"  # the host is probed from its other sources
    assert any(n.startswith("nvidia-smi-topo not used: cannot parse `nvidia-smi-topo` output line 3: GPU1") for n in facts.notes)
    assert [g.socket for g in facts.gpus] == [None] * 4  # nothing else tells the GPUs' sockets here...
    assert slurm_node_line(facts).startswith("NodeName=tray CPUs=144 Boards=1 SocketsPerBoard=2 CoresPerSocket=72")
    # ...until another source does: sysfs's numa_node of each GPU (hand-written, in the step's format).
    captures["sysfs-gpu"] = "".join(f"{bus[4:]} {node}\n" for bus, node in zip(GB200_BUSES, (0, 0, 1, 1), strict=True))
    facts = derive_facts("tray", captures)
    assert [(g.socket, g.affinity_source) for g in facts.gpus] == [(0, "sysfs-gpu")] * 2 + [(1, "sysfs-gpu")] * 2


def test_probe_replay_of_grace_hosts_exits_0_with_their_shapes(tmp_path):
    # Through the real command: before this change the GB200 topo -m failed the whole host.
    captures = tmp_path / "cap"
    for host, files in (("gh200", gh200()), ("tray", gb200()), ("t01", gb200("gb200-container"))):
        (captures / host).mkdir(parents=True)
        for name, text in files.items():
            (captures / host / f"{name}.txt").write_text(text)
    done = run_cli("probe", "--replay", str(captures), "--facts-dir", str(tmp_path / "facts"), "--json")
    assert done.returncode == 0, done.stderr
    hosts = {entry["host"]: entry["facts"] for entry in json.loads(done.stdout)["hosts"]}
    shapes = {host: (len(f["cpu"]["sockets"]), [g["socket"] for g in f["gpus"]]) for host, f in hosts.items()}
    assert shapes == {"gh200": (1, [0]), "tray": (2, [0, 0, 1, 1]), "t01": (2, [0, 0, 1, 1])}
