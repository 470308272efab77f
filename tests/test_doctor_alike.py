"""doctor's checks that the nodes are alike (provision.doctor.alike) as pure functions on reports."""

from __future__ import annotations

from dataclasses import replace

from doctor_support import FACTS, cluster, node
from provision.doctor import alike, sources
from provision.doctor.model import NodeReport


def test_reach_names_the_unreachable_node_and_the_odd_uid():
    result = alike.check_reach(
        cluster(NodeReport("n2", error="unreachable: connection refused"), node("n3", job_ids=(1001, 1000))), "mpi"
    )
    assert result.status == "fail" and result.hosts == ("n2", "n3")
    assert "n2: unreachable: connection refused" in result.detail and "1001:1000 on n3; the others 1000:1000" in result.detail


def test_software_names_the_minority_and_what_the_majority_has():
    odd = node("n4", software=sources.Software(nccl="2.18.3"))
    others = [replace(r, software=sources.Software(nccl="2.19.3")) for r in cluster(size=3)]
    result = alike.check_software([*others, odd])
    assert result.status == "fail" and result.hosts == ("n4",)
    assert "NCCL: 2.18.3 on n4; the others 2.19.3" in result.detail


def test_hardware_memory_outside_the_tolerance_warns():
    small = node("n2", facts=replace(FACTS, host="n2", memory_mib=FACTS.memory_mib // 2))
    result = alike.check_hardware(cluster(small))
    assert result.status == "warn" and result.hosts == ("n2",)
