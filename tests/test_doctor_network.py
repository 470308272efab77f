"""doctor's network checks (provision.doctor.network): names, subnets and MTU, RDMA ports."""

from __future__ import annotations

from dataclasses import replace

from doctor_support import FACTS, cluster, node, with_mtu, with_rdma
from provision.doctor import alike, network, pairwise
from provision.facts.model import NetInterface


def test_names_a_node_that_resolves_a_peer_elsewhere_and_loopback_self_resolution():
    table = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3", "n4": "10.0.0.4"}
    reports = [node(h, resolved=dict(table)) for h in table]
    reports[1] = replace(reports[1], resolved={**table, "n1": "10.9.9.9"})
    reports[2] = replace(reports[2], resolved={**table, "n3": "127.0.1.1"})
    result = network.check_names(reports)
    assert result.status == "fail" and result.hosts == ("n2", "n3")
    assert "n1 is 10.9.9.9 on n2; 10.0.0.1 on the others" in result.detail
    assert "n3 resolves its own name to 127.0.1.1" in result.detail


def test_pairs_and_names_not_tried_are_not_a_pass():
    # The job user is missing everywhere: its session never ran, so no pair and no name was tried.
    missing = [node(h, job_ids=None) for h in ("n1", "n2", "n3")]
    pairs = pairwise.check_pairwise(missing, "alice")
    assert pairs.status == "warn" and pairs.hosts == ("n1", "n2", "n3") and "not tried: no user alice" in pairs.detail
    reach = alike.check_reach(missing, "alice")
    assert reach.status == "fail" and "no user alice on n1, n2, n3 (cluster_users + provision setup-cluster" in reach.detail
    names = network.check_names(missing)
    assert names.status == "warn" and "not checked on n1, n2, n3" in names.detail
    # One node alone has no pair: that is a pass, and says why.
    assert pairwise.check_pairwise([node("n1")], "mpi").status == "pass"


def test_network_needs_a_common_subnet_and_one_mtu():
    assert network.check_network(cluster()).status == "pass"
    jumbo = network.check_network(cluster(with_mtu("n2", "eth0", 9000)))
    assert jumbo.status == "fail" and jumbo.hosts == ("n2",) and "9000 on n2; 1500 on the others" in jumbo.detail
    elsewhere = node("n3", facts=replace(FACTS, host="n3", interfaces=(NetInterface("eth0", True, ("10.1.0.5/24",)),)))
    assert network.check_network(cluster(elsewhere)).status == "fail"


def test_rdma_ports_must_be_active_where_any_node_has_them():
    # The RDMA ports come from probe's sysfs-rdma (doctor reads them once): one of three RoCE ports DOWN.
    result = network.check_rdma(cluster(with_rdma("n1", "handwritten/roce-2port/sysfs-rdma.txt"), size=2))
    assert result.status == "fail" and result.hosts == ("n1", "n2")
    assert "mlx5_1/1 DOWN" in result.detail and "n2 has no InfiniBand/RoCE port" in result.detail
