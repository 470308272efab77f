"""doctor's cross-node checks as pure functions on reports (no SSH), GPU health on real
``nvidia-smi -q -x`` captures, the clock with a stand-in clock."""

from __future__ import annotations

from dataclasses import dataclass, replace

from conftest import FIXTURES
from provision.doctor import checks, pairwise, sources
from provision.doctor.model import Limits, NodeReport
from provision.facts.derive import derive_facts
from provision.facts.model import NetInterface

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
        mtus={"eth0": 1500},
        clock_offset=0.01,
        clock_error=0.001,
    )
    return replace(base, **changes)


def cluster(*odd: NodeReport, size: int = 4) -> list[NodeReport]:
    reports = {f"n{i}": node(f"n{i}") for i in range(1, size + 1)}
    reports.update({r.host: r for r in odd})
    return list(reports.values())


def test_reach_names_the_unreachable_node_and_the_odd_uid():
    result = checks.check_reach(
        cluster(NodeReport("n2", error="unreachable: connection refused"), node("n3", job_ids=(1001, 1000))), "mpi"
    )
    assert result.status == "fail" and result.hosts == ("n2", "n3")
    assert "n2: unreachable: connection refused" in result.detail and "1001:1000 on n3; the others 1000:1000" in result.detail


def test_software_names_the_minority_and_what_the_majority_has():
    odd = node("n4", software=sources.Software(nccl="2.18.3"))
    others = [replace(r, software=sources.Software(nccl="2.19.3")) for r in cluster(size=3)]
    result = checks.check_software([*others, odd])
    assert result.status == "fail" and result.hosts == ("n4",)
    assert "NCCL: 2.18.3 on n4; the others 2.19.3" in result.detail


def test_hardware_memory_outside_the_tolerance_warns():
    small = node("n2", facts=replace(FACTS, host="n2", memory_mib=FACTS.memory_mib // 2))
    result = checks.check_hardware(cluster(small))
    assert result.status == "warn" and result.hosts == ("n2",)


def test_limits_memlock_fails_only_where_an_rdma_device_exists():
    hand_written_port = sources.parse_rdma("mlx5_0/1\t4: ACTIVE\tInfiniBand\n")  # HAND-WRITTEN step output
    rdma = node("n1", own_limits=Limits(64, 65536), ib_ports=hand_written_port)
    plain = node("n2", own_limits=Limits(64, 65536))
    result = checks.check_limits([rdma, plain, node("n3")])
    assert result.status == "fail" and result.hosts == ("n1", "n2")
    assert "64 KiB with an RDMA device" in result.detail and "64 KiB on n2" in result.detail


def test_limits_prefer_what_peer_sessions_saw_and_scale_shm_with_gpus():
    seen_by_peers = node("n1", peer_limits={"n2": Limits(8192, 1024)})
    result = checks.check_limits([seen_by_peers, node("n2", own_limits=Limits(None, 65536))])
    assert result.hosts == ("n2",) and "8 MiB on n2" in result.detail and "1024 on n2" in result.detail
    assert checks.session_limits(node("n3", login_user="root", job_user="mpi"), [])[0] is None  # not the job user's session


def test_names_a_node_that_resolves_a_peer_elsewhere_and_loopback_self_resolution():
    table = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3", "n4": "10.0.0.4"}
    reports = [node(h, resolved=dict(table)) for h in table]
    reports[1] = replace(reports[1], resolved={**table, "n1": "10.9.9.9"})
    reports[2] = replace(reports[2], resolved={**table, "n3": "127.0.1.1"})
    result = checks.check_names(reports)
    assert result.status == "fail" and result.hosts == ("n2", "n3")
    assert "n1 is 10.9.9.9 on n2; 10.0.0.1 on the others" in result.detail
    assert "n3 resolves its own name to 127.0.1.1" in result.detail


def test_pairs_and_names_not_tried_are_not_a_pass():
    # The job user is missing everywhere: its session never ran, so no pair and no name was tried.
    missing = [node(h, job_ids=None) for h in ("n1", "n2", "n3")]
    pairs = pairwise.check_pairwise(missing, "alice")
    assert pairs.status == "warn" and pairs.hosts == ("n1", "n2", "n3") and "not tried: no user alice" in pairs.detail
    reach = checks.check_reach(missing, "alice")
    assert reach.status == "fail" and "no user alice on n1, n2, n3 (cluster_users + provision setup-cluster" in reach.detail
    names = checks.check_names(missing)
    assert names.status == "warn" and "not checked on n1, n2, n3" in names.detail
    # One node alone has no pair: that is a pass, and says why.
    assert pairwise.check_pairwise([node("n1")], "mpi").status == "pass"


def test_shm_on_a_node_without_gpus_names_no_gpu_count():
    result = checks.check_limits([node("n1", shm_kib=64 * 1024)])
    assert result.status == "warn"
    assert result.detail.startswith("/dev/shm small: 64 MiB (< 512 MiB) on n1. Fix: remount it bigger")


def test_network_needs_a_common_subnet_and_one_mtu():
    assert checks.check_network(cluster()).status == "pass"
    jumbo = checks.check_network(cluster(node("n2", mtus={"eth0": 9000})))
    assert jumbo.status == "fail" and jumbo.hosts == ("n2",) and "9000 on n2; 1500 on the others" in jumbo.detail
    elsewhere = node("n3", facts=replace(FACTS, host="n3", interfaces=(NetInterface("eth0", True, ("10.1.0.5/24",)),)))
    assert checks.check_network(cluster(elsewhere)).status == "fail"


def test_rdma_ports_must_be_active_where_any_node_has_them():
    hand_written = "mlx5_0/1\t4: ACTIVE\tInfiniBand\nmlx5_1/1\t1: DOWN\tEthernet\n"  # HAND-WRITTEN step output
    result = checks.check_rdma(cluster(node("n1", ib_ports=sources.parse_rdma(hand_written)), size=2))
    assert result.status == "fail" and result.hosts == ("n1", "n2")
    assert "mlx5_1/1 DOWN" in result.detail and "n2 has no InfiniBand/RoCE port" in result.detail


@dataclass
class StandInClock:
    """TEST STAND-IN for two clocks: the controller's and a node's running ``skew`` seconds ahead,
    with a one-way network delay; yields the four readings doctor takes."""

    skew: float
    delay: float
    run: float

    def readings(self) -> tuple[float, float, float, float]:
        sent = 1_700_000_000.0
        node_start = sent + self.delay + self.skew
        node_end = node_start + self.run
        received = node_end - self.skew + self.delay
        return sent, node_start, node_end, received


def test_clock_offset_is_corrected_for_the_round_trip():
    offset, error = sources.clock_offset(*StandInClock(skew=30.0, delay=0.2, run=0.5).readings())
    assert abs(offset - 30.0) < 1e-6 and abs(error - 0.2) < 1e-6
    late = node("n2", clock_offset=offset, clock_error=error)
    result = checks.check_time(cluster(late))
    assert result.status == "warn" and result.hosts == ("n2",) and "n2 is 30.0 s ahead" in result.detail
    assert sources.parse_clock("1700000000.123456789\n", "c") == 1700000000.123456789


def _health(name: str, edit: tuple[str, str] | None = None):
    text = (FIXTURES / "nvidia-smi-q-x" / name).read_text()
    if edit:  # HAND-EDITED copy of the real capture: one value changed
        assert edit[0] in text
        text = text.replace(edit[0], edit[1], 1)
    return sources.parse_gpu_health(text)


def test_gpu_health_reads_real_captures():
    (p100,) = _health("tesla-p100.xml")
    assert p100.bus_id == "0000:00:04.0" and p100.persistence is False and p100.volatile_uncorrected == 0
    assert not p100.retired_pending and not p100.remapped_pending
    (a100,) = _health("a100-sxm4-mig.xml")
    assert a100.volatile_uncorrected is None and not a100.remapped_pending  # N/A in MIG mode


def test_gpu_health_check_fails_on_errors_and_a_gpu_off_the_bus():
    healthy = _health("tesla-p100.xml")
    bad = _health(
        "tesla-p100.xml", ("<pending_retirement>No</pending_retirement>", "<pending_retirement>Yes</pending_retirement>")
    )
    result = checks.check_gpu_health(
        [
            node("n1", gpu_health=healthy, pci_gpus=1, xids=()),
            node("n2", gpu_health=bad, pci_gpus=2, xids=None),
        ]
    )
    assert result.status == "fail" and result.hosts == ("n1", "n2")  # n1: persistence off (warn)
    assert "page retirement pending" in result.detail and "driver lists 1 GPU(s), PCI shows 2" in result.detail
    assert "kernel log not readable on n2" in result.detail


def test_verdict_and_strict():
    results = [checks.CheckResult("a", "pass"), checks.CheckResult("b", "warn")]
    assert checks.verdict(results) == ("ready, with 1 warning(s) (b)", 0)
    assert checks.verdict(results, strict=True)[1] == 1


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


def test_gpus_on_pci_without_nvidia_smi_warn_and_say_what_to_do():
    # Issue 26: "gpu health: pass — no nvidia-smi on any node" on a GPU cluster.
    result = checks.check_gpu_health([node("n1", gpu_health=None, pci_gpus=4), node("n2", gpu_health=None, pci_gpus=0)])
    assert result.status == "warn" and result.hosts == ("n1",)
    assert result.detail.startswith("no nvidia-smi on n1 although PCI shows NVIDIA GPUs there: install the NVIDIA driver")
    plain = checks.check_gpu_health([node("n2", gpu_health=None, pci_gpus=0)])
    assert plain.status == "pass" and plain.detail == "no NVIDIA GPU on any node (no nvidia-smi, none on PCI)"
    mixed = checks.check_gpu_health(
        [node("n1", gpu_health=_health("tesla-p100.xml"), pci_gpus=1, xids=()), node("n3", pci_gpus=2)]
    )
    assert mixed.hosts == ("n1", "n3") and "no nvidia-smi on n3" in mixed.detail


def test_limit_warnings_say_the_limits_conf_line():
    result = checks.check_limits([node("n1", own_limits=Limits(8192, 1024))])
    assert (
        "memlock not unlimited: 8 MiB on n1. Fix: the line `*  -  memlock  unlimited` in /etc/security/limits.d/" in result.detail
    )
    assert "Fix: the line `*  -  nofile  4096`" in result.detail
