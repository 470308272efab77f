"""Grace hosts' captures for tests: the published ones (tests/fixtures/captures/gh200-*, gb200-*;
sources in SOURCES.md, "Grace machines") and, where none was published, ones written BY HAND:

- `lscpu -p`: no Grace machine's was found. Grace has 72 cores per socket and one thread per
  core; socket s holds CPUs 72s..72s+71 on NUMA node s (the GB200 tray's and GH200's CPU
  Affinity, 0-71 and 72-143; the `lscpu` summaries published for these machines: "Thread(s) per
  core: 1", "Core(s) per socket: 72", "Socket(s): 1" on a GH200 in vllm-project/vllm#14636 and
  archspec/archspec-json#83, "Socket(s): 2" and "CPU(s): 144" on a GB200 in
  NVIDIA/exemplar-performance#43).
- `nvidia-smi --query-gpu`: none found. Names as the published outputs print them ("NVIDIA GH200
  480GB", "NVIDIA GB200"); the GH200's bus id is the Aerial README's, 00000009:01:00.0; the GB200
  ones are made up in the same form; memory 97871 MiB (GH200, the nvidia-smi of the Lambda
  capture) and 189471 MiB (GB200, sirius-db/sirius bench/gb200-4gpu/HARDWARE.md).
"""

from __future__ import annotations

from conftest import read_fixture


def grace_lscpu_p(sockets: int, with_nodes: bool = True) -> str:
    """HAND-WRITTEN `lscpu -p=CPU,CORE,SOCKET,NODE` of ``sockets`` Grace CPUs (module docstring)."""
    rows = [f"{cpu},{cpu},{cpu // 72},{cpu // 72 if with_nodes else ''}" for cpu in range(72 * sockets)]
    return "# CPU,Core,Socket,Node\n" + "\n".join(rows) + "\n"


def rank_lines(text: str) -> list[str]:
    """The ``rank N=host slot=S:C`` lines of a rank file."""
    return [line for line in text.splitlines() if line.startswith("rank ")]


def gh200() -> dict[str, str]:
    """One GH200: the Aerial host's real topo -m, the real numactl -H of Linux commit 63db8170bf34
    (another GH200: both are one Grace with CPUs 0-71 on node 0 and the GPU's memory on node 1),
    and the hand-written lscpu -p and GPU list."""
    return {
        "uname-m": "aarch64\n",
        "nvidia-smi-topo": read_fixture("captures", "gh200-aerial", "nvidia-smi-topo.txt"),
        "numactl-H": read_fixture("captures", "gh200-fakenuma-mail", "numactl-H.txt"),
        "lscpu-p": grace_lscpu_p(1),
        "nvidia-smi-query": "0, NVIDIA GH200 480GB, 00000009:01:00.0, 97871 MiB\n",
    }


GB200_BUSES = ("00000008:01:00.0", "00000009:01:00.0", "00000018:01:00.0", "00000019:01:00.0")  # made up
GB200_QUERY = "".join(f"{i}, NVIDIA GB200, {bus}, 189471 MiB\n" for i, bus in enumerate(GB200_BUSES))


def gb200(topo: str = "gb200-nvl-tray") -> dict[str, str]:
    """A GB200 tray: a real topo -m (the tray's, or the container's), hand-written lscpu -p and GPU list."""
    return {
        "uname-m": "aarch64\n",
        "nvidia-smi-topo": read_fixture("captures", topo, "nvidia-smi-topo.txt"),
        "lscpu-p": grace_lscpu_p(2),
        "nvidia-smi-query": GB200_QUERY,
    }
