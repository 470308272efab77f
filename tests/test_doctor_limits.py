"""doctor's limits check (provision.doctor.limits): memlock, open files and /dev/shm as the job user's sessions see them."""

from __future__ import annotations

from doctor_support import node, with_rdma
from provision.doctor import limits
from provision.doctor.model import Limits


def test_limits_memlock_fails_only_where_an_rdma_device_exists():
    rdma = with_rdma("n1", "captures/hwloc-32em64t-mlx4/sysfs-rdma.txt", own_limits=Limits(64, 65536))
    plain = node("n2", own_limits=Limits(64, 65536))
    result = limits.check_limits([rdma, plain, node("n3")])
    assert result.status == "fail" and result.hosts == ("n1", "n2")
    assert "64 KiB with an RDMA device" in result.detail and "64 KiB on n2" in result.detail


def test_limits_prefer_what_peer_sessions_saw_and_scale_shm_with_gpus():
    seen_by_peers = node("n1", peer_limits={"n2": Limits(8192, 1024)})
    result = limits.check_limits([seen_by_peers, node("n2", own_limits=Limits(None, 65536))])
    assert result.hosts == ("n2",) and "8 MiB on n2" in result.detail and "1024 on n2" in result.detail
    assert limits.session_limits(node("n3", login_user="root", job_user="mpi"), [])[0] is None  # not the job user's session


def test_shm_on_a_node_without_gpus_names_no_gpu_count():
    result = limits.check_limits([node("n1", shm_kib=64 * 1024)])
    assert result.status == "warn"
    assert result.detail.startswith("/dev/shm small: 64 MiB (< 512 MiB) on n1. Fix: remount it bigger")


def test_limit_warnings_say_the_limits_conf_line():
    result = limits.check_limits([node("n1", own_limits=Limits(8192, 1024))])
    assert (
        "memlock not unlimited: 8 MiB on n1. Fix: the line `*  -  memlock  unlimited` in /etc/security/limits.d/" in result.detail
    )
    assert "Fix: the line `*  -  nofile  4096`" in result.detail
