"""slurm.conf node lines."""

from plan_support import minsky
from provision.plans.slurm import slurm_node_line


def test_minsky_line():
    line = slurm_node_line(minsky("sys-89074"))
    assert line == "NodeName=sys-89074 CPUs=160 Boards=1 SocketsPerBoard=2 CoresPerSocket=10 ThreadsPerCore=8 Gres=gpu:4"
