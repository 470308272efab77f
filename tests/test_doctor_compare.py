"""How doctor's checks compare nodes (provision.doctor.compare): the majority, the worst status,
the nodes that answered, a host list on one line, and a whole "same on every node" check."""

from __future__ import annotations

from doctor_support import cluster, node
from provision.doctor import sources
from provision.doctor.compare import answered, compare, hosts_list, majority, worst
from provision.doctor.model import NodeReport


def test_majority_takes_the_first_nodes_value_on_a_tie_and_names_the_others():
    assert majority({"n1": "a", "n2": "b", "n3": "b"}) == ("b", ["n1"])
    assert majority({"n1": "a", "n2": "b"}) == ("a", ["n2"])
    assert majority({}) == (None, [])


def test_worst_status_and_the_nodes_that_answered():
    assert worst(["pass", "fail", "warn"]) == "fail" and worst(["warn", "pass"]) == "warn" and worst([]) == "pass"
    reports = [node("n1"), NodeReport("n2", error="unreachable: timed out"), node("n3")]
    assert [r.host for r in answered(reports)] == ["n1", "n3"]


def test_hosts_list_stays_one_line():
    assert hosts_list(["n1", "n2"]) == "n1, n2"
    assert hosts_list([f"n{i}" for i in range(1, 10)], limit=3) == "n1, n2, n3 and 6 more"


def test_compare_groups_the_minority_by_value_and_skips_what_no_node_has():
    odd = [node("n3", software=sources.Software(nccl="2.18.3")), node("n4", software=sources.Software(nccl="2.17.1"))]
    usual = sources.Software(nccl="2.19.3")
    reports = [r if r.host in ("n3", "n4") else node(r.host, software=usual) for r in cluster(*odd, size=6)]
    what = {"NCCL": lambda r: r.software.nccl, "CUDA runtime": lambda r: r.software.cuda_runtime}
    result = compare("software", reports, what)
    assert result.status == "fail" and result.hosts == ("n3", "n4")
    assert result.detail == "NCCL: 2.18.3 on n3; 2.17.1 on n4; the others 2.19.3"
    same = compare("software", cluster(size=3), {"CUDA runtime": lambda r: r.software.cuda_runtime})
    assert same.status == "pass" and same.detail == "nothing to compare"
