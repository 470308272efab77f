"""gres.conf and the slurm.conf lines it needs, from probed facts.

One line per GPU: ``NodeName=<inventory short name> Name=gpu Type=<type> File=/dev/nvidiaN Cores=<list>``
under ``AutoDetect=off`` (slurmd built without NVML, or NVML unwanted, must not guess).

- ``Cores=`` is Slurm's *logical* core index (gres.conf(5): "core 0 is the first core on the first
  socket", lstopo's ``Core L#``), never the OS CPU numbers ``nvidia-smi topo -m`` prints: the
  facts number sockets and cores as hwloc does, so the cores of GPU g are those of its socket,
  counted over the sockets before it. ``CPUs=`` (OS numbers under the old name) is never written:
  slurmd 22.05 reads it as core indexes too, refusing numbers past the last core ("Invalid GRES
  data") and silently binding others to the wrong cores (tests/test_gres_slurmd.py shows both).
- A GPU whose socket is unknown gets no ``Cores=`` (Slurm then lets any core use it) and a note.
- ``Type=`` is the model as Slurm's own NVML detection names it: lower case, spaces become ``_``
  (``Tesla P100-SXM2-16GB`` -> ``tesla_p100-sxm2-16gb``), and anything but letters, digits, ``.``,
  ``_`` and ``-`` becomes ``_`` too, so the token is safe in ``--gres=gpu:TYPE:N``.
- ``File=/dev/nvidiaN`` uses nvidia-smi's index N: the driver's minor number as long as it numbers
  GPUs in PCI order (its default; nvidia-smi lists them in that order).
- Hosts whose GPU lines are identical fold into one line with a hostlist (``node[01-16]``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from provision.facts.model import HostFacts
from provision.plans.hostlist import HostlistError, expand, fold
from provision.plans.slurm import identity_problems, inventory_problem, node_name, slurm_node_line
from provision.text import shown_value

GRES_TYPES_LINE = "GresTypes=gpu"
_UNSAFE = re.compile(r"[^a-z0-9._-]")
_NVIDIA_SMI = "nvidia-smi-query"


def gpu_type(model: str) -> str:
    """``Tesla P100-SXM2-16GB`` -> ``tesla_p100-sxm2-16gb`` (see the module docstring)."""
    token = _UNSAFE.sub("_", "_".join(model.strip().lower().split()))
    return token or "gpu"


def core_ranges(cores: tuple[int, ...] | list[int]) -> str:
    """``(0, 1, 2, 5)`` -> ``0-2,5`` (Slurm's range syntax)."""
    parts: list[str] = []
    ordered = sorted(set(cores))
    start = 0
    for position in range(1, len(ordered) + 1):
        if position == len(ordered) or ordered[position] != ordered[position - 1] + 1:
            low, high = ordered[start], ordered[position - 1]
            parts.append(str(low) if low == high else f"{low}-{high}")
            start = position
    return ",".join(parts)


def socket_cores(facts: HostFacts, socket: int) -> tuple[int, ...]:
    """Slurm's logical core indexes of socket ``socket``: its cores, counted after the sockets before it."""
    offset = 0
    for each in facts.cpu.sockets:
        if each.index == socket:
            return tuple(range(offset, offset + len(each.cores)))
        offset += len(each.cores)
    return ()


@dataclass(frozen=True)
class GpuLine:
    """What one gres.conf line says about one GPU (the host's name aside)."""

    type: str
    file: str
    cores: str | None  # None: affinity unknown, no Cores=

    def text(self, node_names: str) -> str:
        """The gres.conf line for ``node_names`` (a name or a hostlist)."""
        cores = f" Cores={self.cores}" if self.cores is not None else ""
        return f"NodeName={node_names} Name=gpu Type={self.type} File={self.file}{cores}"


@dataclass(frozen=True)
class HostGres:
    """One host's GPUs as gres.conf and slurm.conf describe them."""

    name: str  # NodeName: the inventory name's short form
    lines: tuple[GpuLine, ...]
    node_line: str  # slurm.conf NodeName line, Gres=gpu:TYPE:N
    notes: tuple[str, ...]


@dataclass(frozen=True)
class GresPlan:
    """gres.conf, the slurm.conf lines for it, and what went wrong host by host."""

    gres_conf: str
    slurm_conf: str  # GresTypes=gpu (when any host has GPUs) and the NodeName lines
    notes: tuple[str, ...]  # warnings, each naming its host
    errors: tuple[str, ...]  # hosts left out, each naming its host
    # {host: why} of the errors caused by what that host reported itself (a name it claims, GPUs it
    # could not list), not by the inventory or the facts folder: that host alone is to blame
    faults: dict[str, str] = dataclasses.field(default_factory=dict)


def _gpus_unknown(facts: HostFacts) -> str | None:
    """Why this host's GPUs cannot be listed although it may have some, or None."""
    if facts.gpus:
        return None
    why = facts.unavailable.get(_NVIDIA_SMI)
    if why and why != "not installed":
        return f"nvidia-smi failed ({why}): its GPUs are unknown"
    hinted = [note for note in facts.notes if "NVIDIA GPU(s) but nvidia-smi is not available" in note]
    if hinted:
        return f"{hinted[0]}: its GPUs are unknown (install the NVIDIA driver's nvidia-smi and probe again)"
    return None


def host_gres(facts: HostFacts) -> HostGres:
    """gres.conf lines and the typed slurm.conf NodeName line of one host."""
    name = node_name(facts.host)
    notes: list[str] = []
    lines = []
    for gpu in sorted(facts.gpus, key=lambda g: g.index):
        cores = socket_cores(facts, gpu.socket) if gpu.socket is not None else ()
        if not cores:
            notes.append(
                f"host {facts.host}: GPU {gpu.index} ({gpu.bus_id}): socket affinity unknown; no Cores= (any core may use it)"
            )
        lines.append(GpuLine(gpu_type(gpu.name), f"/dev/nvidia{gpu.index}", core_ranges(cores) if cores else None))
    counts: dict[str, int] = {}
    for line in lines:
        counts[line.type] = counts.get(line.type, 0) + 1
    if len(counts) > 1:
        notes.append(f"host {facts.host}: GPUs of {len(counts)} models ({', '.join(counts)}): one Type= each")
    node_line = slurm_node_line(dataclasses.replace(facts, gpus=()))
    if counts:
        node_line += " Gres=" + ",".join(f"gpu:{kind}:{count}" for kind, count in counts.items())
    return HostGres(name, tuple(lines), node_line, tuple(notes))


def _folded(groups: dict[tuple, list[str]]) -> list[tuple[str, tuple]]:
    """[(hostlist, key)] in hostlist order of each group's first host; each fold checked by expanding it."""
    folded = []
    for key, names in groups.items():
        hostlist = fold(names)
        if sorted(expand(hostlist)) != sorted(set(names)):
            raise HostlistError(f"hosts {', '.join(names)}: the hostlist {shown_value(hostlist)} does not give them back")
        folded.append((hostlist, key))
    return sorted(folded, key=lambda item: expand(item[0])[0])


def plan_gres(hosts: list[HostFacts], version: str = "") -> GresPlan:
    """gres.conf and slurm.conf lines for ``hosts``; a host that cannot be described is an error, the rest kept."""
    notes: list[str] = []
    errors: list[str] = []
    described: list[HostGres] = []
    owners: dict[str, str] = {}
    faults: dict[str, str] = {}
    refused = identity_problems(hosts)
    for facts in hosts:
        unknown = _gpus_unknown(facts)
        if unknown:
            errors.append(faults.setdefault(facts.host, f"host {facts.host}: {unknown}"))
            continue
        if facts.host in refused:
            errors.append(refused[facts.host])
            if not inventory_problem(facts.host, hosts):  # a reserved or shared inventory name is the user's
                faults[facts.host] = refused[facts.host]
            continue
        gres = host_gres(facts)
        if gres.name in owners:
            errors.append(
                f"host {facts.host}: short name {gres.name} is also host {owners[gres.name]}'s; NodeName must be unique"
            )
            continue
        owners[gres.name] = facts.host
        notes.extend(gres.notes)
        if not gres.lines:
            notes.append(f"host {facts.host}: no GPUs; no gres.conf lines")
        described.append(gres)
    models: dict[str, set[str]] = {}
    for facts in hosts:
        for gpu in facts.gpus:
            models.setdefault(gpu_type(gpu.name), set()).add(gpu.name)
    for kind, names in models.items():
        if len(names) > 1:
            notes.append(f"Type={kind} stands for {len(names)} model names ({', '.join(sorted(names))})")

    by_layout: dict[tuple, list[str]] = {}
    by_node: dict[tuple, list[str]] = {}
    for gres in described:
        if gres.lines:
            by_layout.setdefault(gres.lines, []).append(gres.name)
        by_node.setdefault(tuple(gres.node_line.split(" ")[1:]), []).append(gres.name)
    header = f"# gres.conf from probed facts (provision {version} slurm-gres)".replace("  ", " ")
    gres_lines = [header, "AutoDetect=off"]
    for hostlist, layout in _folded(by_layout):
        gres_lines.extend(line.text(hostlist) for line in layout)
    node_lines = [GRES_TYPES_LINE] if by_layout else []
    node_lines.extend(f"NodeName={hostlist} {' '.join(rest)}" for hostlist, rest in _folded(by_node))
    slurm_conf = "\n".join(node_lines) + "\n" if node_lines else ""
    return GresPlan("\n".join(gres_lines) + "\n", slurm_conf, tuple(notes), tuple(errors), faults)
