"""Counts beyond any real machine are refused at parse time, and nothing grows quadratically in
them (issue 24 finding 6: 5000 GPUs and 256 RDMA devices cost the controller 44 s and 1.7 GB, and
one host's topology print 5 min 51 s)."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import capture_dir, run_cli
from provision.errors import ParseError
from provision.facts import bounds
from provision.facts.numactl import parse_numactl_hardware
from provision.facts.nvidia import parse_gpu_query, parse_sysfs_gpu, parse_topo_matrix
from provision.probe.gather import Capture
from provision.probe.report import gpu_nic_lines
from provision.probe.run import facts_from_captures


def gpu_query(count: int) -> str:
    return "".join(f"{i}, Tesla V100-SXM2-16GB, 0000{i // 256:04x}:{i % 256:02x}:00.0, 16160 MiB\n" for i in range(count))


def topo_matrix(gpus: int, nics: int) -> str:
    """``nvidia-smi topo -m`` in its real layout (tests/fixtures/captures/epyc-8gpu-10nic), any size."""
    columns = [f"GPU{i}" for i in range(gpus)] + [f"NIC{j}" for j in range(nics)]
    lines = ["\t" + "\t".join(columns) + "\tCPU Affinity\tNUMA Affinity"]
    for i in range(gpus):
        cells = (
            " X " if k == i else "NV12" if k < gpus else "PIX" if (k - gpus) % gpus == i else "SYS" for k in range(len(columns))
        )
        lines.append(f"GPU{i}\t" + "\t".join(cells) + "\t0-1\t0")
    lines += ["", "NIC Legend:", ""] + [f"  NIC{j}: mlx5_{j}" for j in range(nics)]
    return "\n".join(lines) + "\n"


def sysfs_rdma(count: int) -> str:
    rows = []
    for j in range(count):
        d = f"/sys/class/infiniband/mlx5_{j}"
        rows += [
            f"{d}/device/uevent:PCI_SLOT_NAME=0000:{j // 32 + 0x80:02x}:{j % 32:02x}.0",
            f"{d}/device/numa_node:0",
            f"{d}/ports/1/state:4: ACTIVE",
            f"{d}/ports/1/link_layer:InfiniBand",
            f"{d}/ports/1/rate:100 Gb/sec (4X EDR)",
        ]
    return "\n".join(rows) + "\n"


def captures(gpus: int, nics: int, topo: bool = True) -> dict[str, Capture]:
    texts = capture_dir("node-hwloc")
    texts["nvidia-smi-query"] = gpu_query(gpus)
    texts["sysfs-rdma"] = sysfs_rdma(nics)
    if topo:
        texts["nvidia-smi-topo"] = topo_matrix(gpus, nics)
    return {name: Capture(name, 0, text, "") for name, text in texts.items()}


def test_the_largest_plausible_host_is_accepted():
    result = facts_from_captures("big", captures(bounds.MAX_GPUS, 16))
    assert result.ok, result.error
    assert len(result.facts.gpus) == bounds.MAX_GPUS and len(result.facts.gpu_nics) == bounds.MAX_GPUS * 16


@pytest.mark.parametrize(
    ("parse", "text", "what"),
    [
        (parse_gpu_query, gpu_query(bounds.MAX_GPUS + 1), "more than 128 GPUs"),
        (parse_topo_matrix, topo_matrix(bounds.MAX_GPUS + 1, 0), "more than 128 GPUs"),
        (parse_sysfs_gpu, "".join(f"0000:{i // 256:02x}:{i % 256:02x}.0 0\n" for i in range(257)), "more than 256 NVIDIA PCI"),
        (parse_numactl_hardware, "available: 1025 nodes (0-1024)\n", "more than 1024 NUMA nodes"),
    ],
)
def test_counts_beyond_any_real_machine_are_refused_as_implausible(parse, text, what):
    with pytest.raises(ParseError, match=what):
        parse(text)


def test_a_host_claiming_5000_gpus_and_256_rdma_devices_fails_alone_with_one_line(tmp_path):
    (tmp_path / "cap").mkdir()
    for host, (gpus, nics) in {"huge": (5000, 256), "real": (8, 2)}.items():
        (tmp_path / "cap" / host).mkdir()
        for name, capture in captures(gpus, nics, topo=False).items():
            (tmp_path / "cap" / host / f"{name}.txt").write_text(capture.stdout)
    done = run_cli("probe", "--replay", str(tmp_path / "cap"), "--no-save")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "huge: parse: cannot parse `nvidia-smi-query` output line 129: more than 128 GPUs: no real host has that many "
        "(refused as implausible)"
    ]


class CountedLinks(tuple):
    """The links, counting how often they are walked."""

    walks = 0

    def __iter__(self):
        CountedLinks.walks += 1
        return super().__iter__()


def test_gpu_nic_lines_walk_the_links_once_not_once_per_gpu():
    facts = facts_from_captures("big", captures(64, 8)).facts
    counted = dataclasses.replace(facts, gpu_nics=CountedLinks(facts.gpu_nics))
    CountedLinks.walks = 0
    lines = gpu_nic_lines(counted)
    assert len(lines) == 64 and lines[0].startswith("GPU 0: mlx5_0 PIX, mlx5_1 SYS")
    assert CountedLinks.walks == 1  # once per GPU would be 64 walks of 512 links: GPUs x GPUs x NICs
