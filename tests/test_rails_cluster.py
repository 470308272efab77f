"""Proof on real OpenMPI 4: hosts whose RDMA ports carry other names (a card swap) are one fabric,
and under mpirun each rank gets its own host's NCCL_IB_HCA, one value for every rank of a host.

The containers have no GPU and no RDMA device: as in test_mpirun_cluster, the probed facts get the
RDMA devices of a real sysfs capture (hwloc's mlx4_0 dump, two copies as a two-HCA board) and two
stand-in GPU entries; on node2 the same two ports are named mlx4_1 and mlx4_2, at the same PCI
addresses. Everything else is probed, and the ranks print what the wrapper gave them."""

from __future__ import annotations

import dataclasses

import pytest
from test_mpirun_cluster import HOSTS, NIC_LINE, NIC_PROGRAM, mpi_cluster  # noqa: F401 - the fixture

from conftest import read_fixture, run_cli
from provision.facts.model import Gpu
from provision.facts.nics import parse_sysfs_rdma
from provision.plans.rankcheck import parse_rankfile
from provision.probe.store import load_host, save_host

pytestmark = pytest.mark.cluster


def test_a_card_swapped_host_runs_and_each_rank_gets_its_own_hosts_hca(mpi_cluster, tmp_path):  # noqa: F811
    cluster, common, facts_dir = mpi_cluster
    hosts = HOSTS[4]
    (real,) = parse_sysfs_rdma(read_fixture("captures", "hwloc-32em64t-mlx4", "sysfs-rdma.txt"))
    names = {hosts[0]: ("mlx4_0", "mlx4_1"), hosts[1]: ("mlx4_1", "mlx4_2")}
    nic_facts = tmp_path / "facts"
    for host in hosts:
        facts = load_host(facts_dir, host)
        gpus = tuple(
            Gpu(i, "stand-in GPU (none in the container)", f"0000:0{i + 1}:00.0", None, None, None, None) for i in range(2)
        )
        first, second = names[host]
        rdma = (dataclasses.replace(real, name=first), dataclasses.replace(real, name=second, pci_address="0000:83:00.0"))
        save_host(nic_facts, dataclasses.replace(facts, gpus=gpus, rdma=rdma), {})
    learners = min(int(cluster.docker_exec(hosts[0], "nproc")), 2)
    dims = f"{learners}x2x1"
    done = run_cli(
        "launch", dims, "--hosts", ",".join(hosts), *common[:2], "--facts-dir", str(nic_facts), *common[4:],
        "--rankfile", str(tmp_path / f"{dims}.rf"), "--run", "--", *NIC_PROGRAM,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rail" not in done.stderr.replace(str(tmp_path), ""), done.stderr  # the same fabric: nothing said
    got = {int(m[0]): m[1:] for m in NIC_LINE.findall(done.stdout)}
    assert sorted(got) == list(range(learners * 2)), done.stdout
    planned = {line.rank: line.host for line in parse_rankfile((tmp_path / f"{dims}.rf").read_text())}
    for rank, (local, host, _cuda, ucx, hca, _ifname) in got.items():
        first, second = names[host]
        assert host == planned[rank], (rank, done.stdout)
        assert hca == f"={first}:1,{second}:1", (rank, done.stdout)  # the host's own names, every rank alike
        assert ucx == f"{(first, second)[int(local)]}:1", (rank, done.stdout)
