"""doctor's node-local mode (provision/plans/node_check.py, templates/commands/node-check.sh.j2): the script
rendered from facts, run here with sh against this machine's /proc and sysfs, a TEST STAND-IN
nvidia-smi printing the real ``-q -x`` captures of tests/fixtures/nvidia-smi-q-x/, and the Slurm
stand-ins of tests/standins/slurm/. tests/test_slurm_drain_cluster.py runs it under the real
slurmd, as HealthCheckProgram and as Prolog.

Slurm's words it is built on, quoted verbatim (SchedMD/slurm at tag slurm-22-05-8-1,
d525b6872a106d32916b33a8738f12510ec7cf04, Debian bookworm's 22.05.8):
- doc/man/man5/slurm.conf.5:1457: "Any action to be taken must be explicitly performed by the
  program" (HealthCheckProgram): the script drains and resumes itself.
- doc/man/man5/slurm.conf.5:1465-1466: "This program will be killed if it does not terminate
  normally within" / "60 seconds."; :3048-3049 (Prolog): "is expected to complete execution quickly
  (in less time than" / "\\fBMessageTimeout\\fR)." and :2254 "Default value is 10 seconds.": the
  budget, one nvidia-smi under ``timeout 5``.
- src/slurmd/slurmd/slurmd.c:2880: ``setenvf(&env, "SLURMD_NODENAME", "%s", conf->node_name);``
  (the health check's environment): run by slurmd, the script knows its node and drains.
- src/slurmd/slurmd/slurmd.c:2892: ``error("health_check failed: rc:%u output:%s",``: what the
  script prints lands in slurmd's log, so under slurmd it prints its one reason line only.
- src/slurmctld/node_mgr.c:2986-2988: ``} else if (reg_msg->status == ESLURMD_PROLOG_FAILED`` ...
  ``if (!IS_NODE_DRAIN(node_ptr) && !IS_NODE_FAIL(node_ptr)) {`` and :2994 ``reason = "Prolog
  error";``: as the Prolog it drains first, with its own reason, then exits 1 (the job is requeued);
  Slurm keeps the reason it finds.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES
from doctor_support import node
from marks_support import scontrol_calls, slurm_standin
from provision.doctor import health, sources
from provision.doctor.model import FAIL
from provision.errors import ProvisionError
from provision.facts.model import Core, CpuTopology, Gpu, HostFacts, NetInterface, RdmaDevice, RdmaPort, Socket
from provision.plans.nics import _VIRTUAL
from provision.plans.node_check import node_expect, node_script

SMI = FIXTURES / "nvidia-smi-q-x"


def _interface() -> tuple[str, int]:
    """An interface of this machine that is up and not virtual (what a node's job interface is), and its MTU."""
    for path in sorted(Path("/sys/class/net").iterdir()):
        if path.name != "lo" and not path.name.startswith(_VIRTUAL) and (path / "operstate").read_text().strip() == "up":
            return path.name, int((path / "mtu").read_text())
    pytest.skip("this machine has no interface up that is not virtual: nothing to stand for a node's job interface")


def _this_machine(name: str = "sn1", gpus: int = 0, **changed) -> HostFacts:
    """Facts that describe this machine as its /proc and sysfs show it now (so every check passes
    here), with ``gpus`` GPUs and ``changed`` fields replaced."""
    online = Path("/sys/devices/system/cpu/online").read_text().strip()
    cpus = sum(int(b) - int(a) + 1 if "-" in part else 1 for part in online.split(",") for a, _, b in [part.partition("-")])
    memory = next(
        int(line.split()[1]) // 1024 for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:")
    )
    cpu = CpuTopology((Socket(0, 0, (0,), tuple(Core(i, i, (i,)) for i in range(cpus))),), 1, "test")
    interface, mtu = _interface()
    job = NetInterface(interface, True, ("10.9.0.1/24",), mtu)  # the address only makes it the job's interface
    facts = HostFacts(
        name,
        name,
        "x86_64",
        cpu,
        gpus=tuple(Gpu(i, "Tesla P100-PCIE-16GB", f"0000:0{i}:04.0", 16384, 0, 0, "test") for i in range(gpus)),
        memory_mib=memory,
        interfaces=(job,),
    )
    return dataclasses.replace(facts, **changed)


def _run(tmp_path: Path, facts: list[HostFacts], *args: str, smi: str | None = None, nodes: str = "", env: dict | None = None):
    """Run the node check for ``facts`` here; ``smi``: what the stand-in nvidia-smi prints for -q -x."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "provision-node-check"
    script.write_text(node_script(facts))
    folder = tmp_path / "slurm"
    environment = slurm_standin(folder, nodes)
    if smi is not None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "smi.xml").write_text(smi)
        stand_in = bin_dir / "nvidia-smi"  # TEST STAND-IN: prints one real capture for -q -x
        stand_in.write_text(f'#!/bin/sh\n[ "$*" = "-q -x" ] || exit 9\ncat {bin_dir / "smi.xml"}\n')
        stand_in.chmod(0o755)
        environment["PATH"] = f"{bin_dir}:{environment['PATH']}"
    # the script sets its own PATH (it runs as root): the stand-ins come in through a wrapper that
    # puts them back first, as a node's /usr/local/bin would
    wrapper = tmp_path / "run.sh"
    wrapper.write_text(f'#!/bin/sh\nsed "s|^PATH=|PATH=$PATH:|" {script} > {script}.t && exec sh {script}.t "$@"\n')
    done = subprocess.run(["sh", str(wrapper), *args], env=environment | (env or {}), capture_output=True, text=True, timeout=60)
    return done, scontrol_calls(folder)


def test_a_healthy_node_passes_silently_and_says_each_check_with_v(tmp_path):
    done, _ = _run(tmp_path, [_this_machine()], "--node", "sn1")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    verbose, _ = _run(tmp_path, [_this_machine()], "--node", "sn1", "-v")
    assert verbose.returncode == 0 and verbose.stdout == ""
    assert [line.split(":")[0] for line in verbose.stderr.splitlines()] == ["ok cpus", "ok memory", "ok network"]


def test_one_reason_line_names_the_first_failing_check_and_counts_the_others(tmp_path):
    facts = _this_machine()
    wrong = dataclasses.replace(
        facts, memory_mib=facts.memory_mib * 2, cpu=dataclasses.replace(facts.cpu, sockets=facts.cpu.sockets * 2)
    )
    done, _ = _run(tmp_path, [wrong], "--node", "sn1")
    cpus = facts.cpu.total_cpus
    assert done.returncode == 1 and done.stderr == ""
    assert done.stdout == f"provision: cpus: {cpus} CPU(s) online, expected {cpus * 2} (and 1 more)\n"


def test_the_job_interface_down_missing_or_with_another_mtu_fails(tmp_path):
    facts = _this_machine()
    job = facts.interfaces[0]
    other_mtu = dataclasses.replace(facts, interfaces=(dataclasses.replace(job, mtu=(job.mtu or 0) + 1),))
    done, _ = _run(tmp_path, [other_mtu], "--node", "sn1")
    assert done.stdout == f"provision: network: {job.name} MTU {job.mtu}, expected {(job.mtu or 0) + 1}\n"
    gone = dataclasses.replace(facts, interfaces=(dataclasses.replace(job, name="ib9"),))
    missing, _ = _run(tmp_path, [gone], "--node", "sn1")
    assert missing.stdout == "provision: network: ib9 missing\n"


def test_rdma_ports_active_when_probed_must_still_be(tmp_path):
    port = RdmaPort(1, "ACTIVE", "LinkUp", "InfiniBand", "100 Gb/sec (4X EDR)")
    facts = _this_machine(
        rdma=(RdmaDevice("mlx5_0", "0000:5e:00.0", 0, (port, dataclasses.replace(port, number=2, state="DOWN"))),)
    )
    done, _ = _run(tmp_path, [facts], "--node", "sn1")  # this machine has no /sys/class/infiniband
    assert done.stdout == "provision: rdma: mlx5_0/1 missing\n"  # port 2 was DOWN when probed: not expected


def _edited(name: str, edit: tuple[str, str] | None = None) -> str:
    text = (SMI / name).read_text()
    if edit:  # HAND-EDITED copy of the real capture: one value changed
        assert edit[0] in text
        text = text.replace(edit[0], edit[1], 1)
    return text


REMAPPED = (  # the element as nvidia-smi prints it on a GPU with row remapping (Ampere on)
    "<remapped_rows>\n<remapped_row_corr>0</remapped_row_corr>\n<remapped_row_pending>Yes</remapped_row_pending>\n</remapped_rows>"
)
CAPTURES = [
    ("tesla-p100.xml", None, ""),
    ("a100-sxm4-mig.xml", None, ""),  # MIG: the devices' own sram counters are not the GPU's volatile ones
    (
        "tesla-p100.xml",
        ("<total>0</total>\n\t\t\t\t</double_bit>", "<total>2</total>\n\t\t\t\t</double_bit>"),
        "volatile uncorrected ECC",
    ),
    (
        "tesla-p100.xml",
        ("<pending_retirement>No</pending_retirement>", "<pending_retirement>Yes</pending_retirement>"),
        "page retirement pending",
    ),
    (
        "a100-sxm4-mig.xml",
        ("<dram_uncorrectable>N/A</dram_uncorrectable>", "<dram_uncorrectable>3</dram_uncorrectable>"),
        "volatile uncorrected ECC",
    ),
    ("a100-sxm4-mig.xml", ("<remapped_rows>N/A</remapped_rows>", REMAPPED), "row remapping pending"),
]


@pytest.mark.parametrize(("capture", "edit", "said"), CAPTURES)
def test_gpu_health_agrees_with_doctors_check_on_real_captures(tmp_path, capture, edit, said):
    text = _edited(capture, edit)
    gpus = sources.parse_gpu_health(text)
    doctor = health.check_gpu_health([node("sn1", gpu_health=gpus, pci_gpus=len(gpus), xids=())])
    done, _ = _run(tmp_path, [_this_machine(gpus=len(gpus))], "--node", "sn1", "-v", smi=text)
    lines = {line.split(":")[0]: line for line in done.stderr.splitlines()}
    assert lines["ok gpu count"] == f"ok gpu count: {len(gpus)} GPU(s)"
    assert ("fail gpu health" in lines) == (doctor.status_of("sn1") == FAIL and "sn1" in doctor.nodes), (lines, doctor)
    if said:
        assert said in lines["fail gpu health"]


def test_a_gpu_off_the_bus_a_missing_or_hung_nvidia_smi_fail_gpu_count(tmp_path):
    one = _edited("tesla-p100.xml")
    done, _ = _run(tmp_path, [_this_machine(gpus=2)], "--node", "sn1", smi=one)
    assert done.stdout == "provision: gpu count: nvidia-smi lists 1 GPU(s), expected 2 (and 1 more)\n"  # and gpu devices
    missing, _ = _run(tmp_path / "b", [_this_machine(gpus=1)], "--node", "sn1")
    assert missing.stdout.startswith("provision: gpu count: nvidia-smi not found (expected 1 GPU(s))")


def test_run_by_slurmd_it_drains_with_its_reason_and_prints_only_that(tmp_path):
    facts = _this_machine(gpus=1)
    done, calls = _run(tmp_path, [facts], nodes="sn1 idle none\n", env={"SLURMD_NODENAME": "sn1"})
    reason = "provision: gpu count: nvidia-smi not found (expected 1 GPU(s)) (and 1 more)"
    assert done.returncode == 1 and done.stdout == reason + "\n" and done.stderr == ""
    assert calls == [f"update | NodeName=sn1 | State=DRAIN | Reason={reason}"]


def test_a_passing_run_resumes_only_what_its_own_checks_drained(tmp_path):
    facts = _this_machine()
    ours = "sn1 drain provision: memory: 1000 MiB, expected 64000\n"
    done, calls = _run(tmp_path, [facts], "--drain", "--node", "sn1", nodes=ours)
    assert done.returncode == 0 and calls == ["update | NodeName=sn1 | State=RESUME"]
    assert done.stderr == "mark sn1 resumed provision: memory: 1000 MiB, expected 64000\n"  # by hand: said
    reasons = ("provision: perf tcp eth0: bad node: slow with 3 of 3 peers", "provision: gpu count: 1 of 2", "bad DIMM (admin)")
    for number, reason in enumerate(reasons):
        kept, calls = _run(tmp_path / str(number), [facts], "--drain", "--node", "sn1", nodes=f"sn1 drain {reason}\n")
        assert kept.returncode == 0 and calls == [], reason  # gpu count did not run: no GPU expected here any more


def test_by_hand_it_only_says_unless_told_and_a_node_it_does_not_know_passes(tmp_path):
    facts = _this_machine(gpus=1)
    done, calls = _run(tmp_path, [facts], "--node", "sn1", nodes="sn1 idle none\n")
    assert done.returncode == 1 and calls == []
    stranger, _ = _run(tmp_path, [facts], "--node", "sn9")
    assert stranger.returncode == 0 and stranger.stdout == "" and "nothing is known of sn9" in stranger.stderr
    for bad in (["--node"], ["--frobnicate"], ["--node", "sn1;reboot"]):
        refused, _ = _run(tmp_path, [facts], *bad)
        assert refused.returncode == 2 and refused.stdout == "", bad


def test_one_script_for_every_node_each_by_its_slurm_name(tmp_path):
    first = _this_machine("sn1.cluster.example")
    second = _this_machine("sn2.cluster.example", gpus=1)
    text = node_script([first, second])
    assert text.startswith("#!/bin/sh\n") and "    sn1) gpus=0;" in text and "    sn2) gpus=1; gpu_files='/dev/nvidia0';" in text
    done, _ = _run(tmp_path, [first, second], "--node", "sn1.cluster.example")  # the short name is the node
    assert done.returncode == 0, done.stdout + done.stderr
    with pytest.raises(ProvisionError, match="both Slurm node sn1"):
        node_script([first, _this_machine("sn1.other.example")])


@pytest.mark.parametrize(
    ("changed", "what"),
    [
        ({"interfaces": (NetInterface("ib0;reboot", True, ("10.9.0.1/24",), 1500),)}, "interface"),
        ({"host": "sn1$(reboot)"}, "node name"),
        ({"rdma": (RdmaDevice("mlx5_0'", None, None, (RdmaPort(1, "ACTIVE", None, None, None),)),)}, "RDMA port"),
    ],
)
def test_a_value_that_is_not_what_it_claims_never_reaches_the_script(changed, what):
    facts = _this_machine(**changed)
    interface = facts.interfaces[0].name
    with pytest.raises(ProvisionError, match=what):
        node_expect(facts, interface)
