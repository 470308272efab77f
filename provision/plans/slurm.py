"""slurm.conf node lines from facts, in ``slurmd -C``'s format (plus ``Gres=gpu:N``)."""

from __future__ import annotations

from provision.facts.model import HostFacts


def slurm_node_line(facts: HostFacts) -> str:
    """``NodeName=h CPUs=160 Boards=1 SocketsPerBoard=2 CoresPerSocket=10 ThreadsPerCore=8 RealMemory=...``."""
    cpu = facts.cpu
    cores = cpu.cores_per_socket if cpu.cores_per_socket is not None else min(len(s.cores) for s in cpu.sockets)
    parts = [
        f"NodeName={facts.hostname}",
        f"CPUs={cpu.socket_count * cores * cpu.threads_per_core}",
        "Boards=1",
        f"SocketsPerBoard={cpu.socket_count}",
        f"CoresPerSocket={cores}",
        f"ThreadsPerCore={cpu.threads_per_core}",
    ]
    if facts.memory_mib is not None:
        parts.append(f"RealMemory={facts.memory_mib}")
    if facts.gpus:
        parts.append(f"Gres=gpu:{len(facts.gpus)}")
    return " ".join(parts)
