"""doctor's health checks (provision.doctor.health): GPU health on real ``nvidia-smi -q -x``
captures, the clock with a stand-in clock."""

from __future__ import annotations

from dataclasses import dataclass

from conftest import FIXTURES
from doctor_support import cluster, node
from provision.doctor import health, sources


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
    result = health.check_time(cluster(late))
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
    result = health.check_gpu_health(
        [
            node("n1", gpu_health=healthy, pci_gpus=1, xids=()),
            node("n2", gpu_health=bad, pci_gpus=2, xids=None),
        ]
    )
    assert result.status == "fail" and result.hosts == ("n1", "n2")  # n1: persistence off (warn)
    assert "page retirement pending" in result.detail and "driver lists 1 GPU(s), PCI shows 2" in result.detail
    assert "kernel log not readable on n2" in result.detail


def test_gpus_on_pci_without_nvidia_smi_warn_and_say_what_to_do():
    # Issue 26: "gpu health: pass — no nvidia-smi on any node" on a GPU cluster.
    result = health.check_gpu_health([node("n1", gpu_health=None, pci_gpus=4), node("n2", gpu_health=None, pci_gpus=0)])
    assert result.status == "warn" and result.hosts == ("n1",)
    assert result.detail.startswith("no nvidia-smi on n1 although PCI shows NVIDIA GPUs there: install the NVIDIA driver")
    plain = health.check_gpu_health([node("n2", gpu_health=None, pci_gpus=0)])
    assert plain.status == "pass" and plain.detail == "no NVIDIA GPU on any node (no nvidia-smi, none on PCI)"
    mixed = health.check_gpu_health(
        [node("n1", gpu_health=_health("tesla-p100.xml"), pci_gpus=1, xids=()), node("n3", pci_gpus=2)]
    )
    assert mixed.hosts == ("n1", "n3") and "no nvidia-smi on n3" in mixed.detail
