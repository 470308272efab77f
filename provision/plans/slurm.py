"""slurm.conf node lines from facts, in ``slurmd -C``'s format (plus ``Gres=gpu:N``).

The numbers follow what ``slurmd -C`` itself prints (Slurm's ``xcpuinfo_hwloc_topo_get``):
``NodeName`` is the short host name (up to the first dot, as ``gethostname_short``), ``CPUs``
the online hardware threads as they are, ``SocketsPerBoard`` the sockets that hold cores,
``CoresPerSocket`` all usable cores divided by the sockets and ``ThreadsPerCore`` the threads
divided by the cores (integer division, as slurmd does), so uneven sockets or mixed SMT never
inflate ``CPUs`` to sockets × cores × threads.
"""

from __future__ import annotations

from provision.facts.model import HostFacts


def slurm_node_line(facts: HostFacts) -> str:
    """``NodeName=h CPUs=160 Boards=1 SocketsPerBoard=2 CoresPerSocket=10 ThreadsPerCore=8 RealMemory=...``."""
    cpu = facts.cpu
    threads = cpu.total_cpus
    cores = sum(len(socket.cores) for socket in cpu.sockets)
    sockets = max(cpu.socket_count, 1)
    parts = [
        f"NodeName={facts.hostname.split('.', 1)[0]}",
        f"CPUs={threads}",
        "Boards=1",
        f"SocketsPerBoard={sockets}",
        f"CoresPerSocket={cores // sockets}",
        f"ThreadsPerCore={threads // cores if cores else 1}",
    ]
    if facts.memory_mib is not None:
        parts.append(f"RealMemory={facts.memory_mib}")
    if facts.gpus:
        parts.append(f"Gres=gpu:{len(facts.gpus)}")
    return " ".join(parts)


def uneven_note(facts: HostFacts) -> str | None:
    """A warning when sockets or cores differ in size (slurm.conf cannot say so; slurmd logs the same)."""
    cpu = facts.cpu
    per_socket = {len(socket.cores) for socket in cpu.sockets}
    per_core = {len(core.cpus) for socket in cpu.sockets for core in socket.cores}
    problems = []
    if len(per_socket) > 1:
        problems.append(f"sockets hold {'/'.join(str(len(s.cores)) for s in cpu.sockets)} cores")
    if len(per_core) > 1:
        problems.append(f"cores run {'/'.join(map(str, sorted(per_core)))} threads")
    if not problems:
        return None
    return f"host {facts.host}: {' and '.join(problems)}; CPUs counts the threads as they are"
