"""How much of each thing a real machine can have: counts beyond these bounds are refused at parse
time. (Not a resource limit: those are doctor's, :mod:`provision.doctor.limits`.)

A node's output is hostile input. A node that claims 5000 GPUs and 256 RDMA devices (279 KB of
captures) would otherwise cost the controller 1.3 million GPU-NIC pairs, gigabytes of memory and
minutes of CPU. Each bound is several times the largest real machine, so no honest host meets one,
and the parser that meets a count beyond it raises :class:`provision.errors.ParseError` for that
host alone (one line; the other hosts go on).

- GPUs per host: :data:`MAX_GPUS` = 128. The largest single-OS GPU servers hold 16 (DGX-2 / HGX-2
  behind NVSwitch) or 20 PCIe cards; composable PCIe fabrics have shown 32 on one host. An
  NVL72 rack is 18 hosts of 4 GPUs each, not one host. NCCL's own topology graph held at most 256
  nodes of each kind (GPU, NIC, CPU) per process for years (``NCCL_TOPO_MAX_NODES 256``,
  NVIDIA/nccl src/include/graph.h), raised in 2.2x only for multi-node NVLink domains.
- RDMA devices per host: :data:`MAX_RDMA_DEVICES` = 256 (NCCL_TOPO_MAX_NODES again; 8 ConnectX
  ports with 16 SR-IOV virtual functions each is 136).
- NVIDIA PCI functions in sysfs (GPUs plus NVSwitches): :data:`MAX_NVIDIA_FUNCTIONS` = 256.
- NUMA nodes per host: :data:`MAX_NUMA_NODES` = 1024, Linux's own ceiling (MAX_NUMNODES =
  1 << NODES_SHIFT; NODES_SHIFT is at most 10 on x86-64, arch/x86/Kconfig).
- CPUs: :data:`provision.facts.cpulist.MAX_CPUS` (65536, over Linux's NR_CPUS ceiling of 8192).

Everything that pairs GPUs with NICs is then at most 128 x 256 = 32768 pairs, and nothing in
provision walks those pairs once per GPU (see :func:`provision.probe.report.gpu_nic_lines`).
"""

from __future__ import annotations

from provision.errors import ParseError

MAX_GPUS = 128
MAX_RDMA_DEVICES = 256
MAX_NVIDIA_FUNCTIONS = 256
MAX_NUMA_NODES = 1024


def check_count(source: str, what: str, count: int, limit: int, line: int | None = None) -> None:
    """Raise :class:`ParseError` naming ``source`` when ``count`` of ``what`` passes ``limit``.

    >>> try:
    ...     check_count("nvidia-smi-query", "GPUs", 129, MAX_GPUS)
    ... except ParseError as error:
    ...     print(error.message)
    more than 128 GPUs: no real host has that many (refused as implausible)
    """
    if count > limit:
        raise ParseError(source, f"more than {limit} {what}: no real host has that many (refused as implausible)", line)
