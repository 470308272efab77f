"""Doctor reports for the checks' unit tests: a healthy node built on the real node-container capture,
and a cluster of them with some odd ones."""

from __future__ import annotations

from dataclasses import replace

from conftest import FIXTURES
from provision.doctor.model import Limits, NodeReport
from provision.facts.derive import derive_facts
from provision.facts.nics import parse_sysfs_rdma

CAPTURE = {p.stem: p.read_text() for p in (FIXTURES / "captures" / "node-container").glob("*.txt")}
FACTS = derive_facts("n", CAPTURE)


def node(host: str, **changes) -> NodeReport:
    """A healthy node report built on the real node-container capture."""
    base = NodeReport(
        host,
        facts=replace(FACTS, host=host),
        login_user="mpi",
        job_ids=(1000, 1000),
        own_limits=Limits(None, 65536),
        shm_kib=4 * 1024 * 1024,
        clock_offset=0.01,
        clock_error=0.001,
    )
    return replace(base, **changes)


def with_mtu(host: str, interface: str, mtu: int, **changes) -> NodeReport:
    """A healthy node whose ``interface`` has ``mtu`` (as sysfs-net would say it)."""
    interfaces = tuple(replace(i, mtu=mtu) if i.name == interface else i for i in FACTS.interfaces)
    return node(host, facts=replace(FACTS, host=host, interfaces=interfaces), **changes)


def with_rdma(host: str, capture: str, **changes) -> NodeReport:
    """A healthy node with the RDMA devices of ``capture`` (a sysfs-rdma file under tests/fixtures)."""
    rdma = parse_sysfs_rdma((FIXTURES / capture).read_text())
    return node(host, facts=replace(FACTS, host=host, rdma=rdma), **changes)


def cluster(*odd: NodeReport, size: int = 4) -> list[NodeReport]:
    """``size`` healthy nodes n1..n<size>, each odd report replacing the node of its name (or added)."""
    reports = {f"n{i}": node(f"n{i}") for i in range(1, size + 1)}
    reports.update({r.host: r for r in odd})
    return list(reports.values())
