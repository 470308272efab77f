"""doctor's node-local mode: the node check Slurm runs on each node (HealthCheckProgram, Prolog), from verified facts.

A node has no provision on it, and Slurm's health check cannot fan out over SSH, so the node
check is a self-contained POSIX sh script (``templates/commands/node-check.sh.j2``), rendered like probe's
gather script: one file for every node of the cluster (slurm.conf names one path everywhere),
holding one ``case`` per Slurm NodeName with what `provision probe` verified there: the GPU count
and the device files gres.conf names, the online CPUs, MemTotal, the job's interface and its MTU
(the interface `launch` uses: :func:`provision.plans.nics.fabric_interface`), the RDMA ports that
were ACTIVE. What the node says about itself now is compared with those, never trusted to
describe itself. No peers are compared (a node alone cannot tell a bad link): that is
``doctor --perf``'s.

Checks (each named as in doctor, so a reason means the same from both): ``gpu count``,
``gpu health`` (doctor's failing GPU health items: volatile uncorrected ECC, page retirement or
row remapping pending; one ``nvidia-smi -q -x`` under ``timeout``), ``gpu devices``, ``cpus``,
``memory`` (at least :data:`MEMORY_SHARE` of the probed MemTotal), ``network``, ``rdma``.
Budget: /proc and sysfs reads, one nvidia-smi bounded by :data:`SMI_TIMEOUT_S`: inside Slurm's
Prolog advice (less than MessageTimeout, 10 s by default) and far inside HealthCheckProgram's
60 s.

>>> from provision.facts.model import CpuTopology, HostFacts
>>> facts = HostFacts("sn1.example.org", "sn1", "x86_64", CpuTopology((), 1, "test"), memory_mib=64000)
>>> node_expect(facts, None)
NodeExpect(name='sn1', gpus=0, gpu_files=(), cpus=0, memory_mib=64000, interface=None, mtu=None, rdma_ports=())
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from provision import __version__
from provision.errors import PlanError, ProvisionError
from provision.facts.model import HostFacts
from provision.plans.gres import host_gres
from provision.plans.nics import fabric_interface
from provision.plans.slurm import node_name
from provision.plans.slurm_marks import MARKER, NODE_NAME, REASON_MAX
from provision.resources import render
from provision.text import shown_value

SMI_TIMEOUT_S = 5  # nvidia-smi -q -x: a hung driver fails the check, it does not hang Slurm
MEMORY_SHARE = 0.95  # MemTotal below this share of the probed one fails (doctor's 5 % memory tolerance)
_IFACE = re.compile(r"[A-Za-z0-9._:-]{1,15}")
_PORT = re.compile(r"[A-Za-z0-9_.-]{1,64}/[0-9]{1,4}")
_FILE = re.compile(r"/dev/nvidia[0-9]{1,4}")


@dataclass(frozen=True)
class NodeExpect:
    """What one node should show, by its Slurm NodeName."""

    name: str
    gpus: int
    gpu_files: tuple[str, ...]
    cpus: int
    memory_mib: int | None
    interface: str | None
    mtu: int | None
    rdma_ports: tuple[str, ...]  # dev/port, ACTIVE when probed


def _checked(pattern: re.Pattern, value: str, what: str, host: str) -> str:
    """A value a node reported, written into a script run as root: only if it is what it should be."""
    if not pattern.fullmatch(value):
        raise ProvisionError(f"host {host}: {what} {shown_value(value[:40])} cannot go into the node check")
    return value


def node_expect(facts: HostFacts, interface: str | None) -> NodeExpect:
    """What ``facts`` say the node has; ``interface``: the job's interface on every node."""
    name = _checked(NODE_NAME, node_name(facts.host), "node name", facts.host)
    files = tuple(_checked(_FILE, line.file, "GPU device", facts.host) for line in host_gres(facts).lines)
    found = next((i for i in facts.interfaces if i.name == interface), None) if interface else None
    ports = tuple(
        _checked(_PORT, f"{device.name}/{port.number}", "RDMA port", facts.host)
        for device in facts.rdma
        for port in device.ports
        if port.state == "ACTIVE"
    )
    return NodeExpect(
        name=name,
        gpus=len(facts.gpus),
        gpu_files=files,
        cpus=facts.cpu.total_cpus,
        memory_mib=facts.memory_mib,
        interface=_checked(_IFACE, interface, "interface", facts.host) if found is not None else None,
        mtu=found.mtu if found is not None else None,
        rdma_ports=ports,
    )


def node_script(facts_list: list[HostFacts]) -> str:
    """The node check for these nodes (one script, one case per node); ProvisionError when two
    hosts share a NodeName or a value cannot be written safely."""
    try:
        interface = fabric_interface(facts_list)
    except PlanError:
        interface = None  # no interface common to every node: the network check is left out
    nodes = [node_expect(facts, interface) for facts in facts_list]
    seen: dict[str, str] = {}
    for facts, node in zip(facts_list, nodes, strict=True):
        if node.name in seen:
            raise ProvisionError(f"hosts {seen[node.name]} and {facts.host} are both Slurm node {node.name}")
        seen[node.name] = facts.host
    return render(
        "node-check.sh.j2",
        version=__version__,
        marker=MARKER,
        nodes=nodes,
        smi_timeout=SMI_TIMEOUT_S,
        memory_share=MEMORY_SHARE,
        reason_max=REASON_MAX,
    )
