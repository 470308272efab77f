"""doctor's runner (provision.doctor.runner) without SSH: what the launch pre-check makes of the checks."""

from __future__ import annotations

from doctor_support import node


def test_for_launch_a_pair_that_spares_the_first_host_is_a_warning():
    from provision.doctor.model import CheckResult
    from provision.doctor.runner import for_launch

    reports = [
        node("n1", pairwise={"n2": "", "n3": ""}),
        node("n2", pairwise={"n1": "", "n3": ""}),
        node("n3", pairwise={"n1": "Permission denied", "n2": "Permission denied"}),
    ]
    failing = CheckResult("pairwise ssh", "fail", ("n3",), "2 of 6 pairs fail as mpi: n3->n1, n3->n2")
    other = CheckResult("software", "fail", ("n2",), "OpenMPI differs")
    judged = for_launch([failing, other], reports, "n1")
    assert judged[0].status == "warn" and "n1 reaches every node" in judged[0].detail and judged[1] == other
    assert for_launch([failing, other], reports, "n3") == [failing, other]  # mpirun would start where SSH fails
    reports[0] = node("n1", pairwise={"n2": "", "n3": "Connection refused"})
    assert for_launch([failing], reports, "n1") == [failing]
