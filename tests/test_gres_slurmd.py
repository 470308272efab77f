"""`provision slurm-gres` against the real slurmd (Debian's Slurm 22.05) on real machine topologies.

For each topology slurmd is given the machine through ``HWLOC_XMLFILE`` (hwloc's documented hook;
tests/test_slurm_cluster.py uses it too) and ``/dev/nvidiaN`` character devices made with mknod
(major 195, as the NVIDIA driver's). provision derives its facts from captures of the same machine
(``probe --replay``). Then:

- ``slurmd -C`` prints the NodeName line provision wrote (without its Gres=, which -C never shows);
- ``slurmd -G`` accepts provision's gres.conf with no error and lists every GPU with its Cores=;
- slurmd's own CPU map (``SlurmdDebug=debug4``: abstract CPU -> machine CPU, with S:C:T) turns each
  GPU's Cores= into exactly the CPUs the hardware puts next to that GPU (hwloc's locality of the
  GPU's PCI device, or nvidia-smi topo -m's CPU Affinity on delos);
- the ``CPUs=`` form (OS CPU numbers, as nvidia-smi prints them) is refused ("Invalid GRES data"),
  or, where the numbers happen to be small enough, read as core indexes: the wrong cores.

Topologies: delos (2 × 20-core x86 with HT, 4 NVLink GPUs: its real numactl -H and nvidia-smi
topo -m; slurmd gets a synthetic hwloc topology with the same CPU numbering, HT siblings n and
n+40, since no hwloc export of it was published); IBM Minsky (POWER8NVL, 4 P100) and NVIDIA DGX-2
(16 V100): real hwloc exports from hwloc's test suite (tests/fixtures/SOURCES.md; both were
exported restricted to 16 and 4 PUs); a 2 × 6-core Xeon with 3 NVIDIA GPUs and interleaved CPU
numbering (socket 0 holds the even CPUs), where OS numbers and logical cores differ most; a GB200
tray (2 Grace × 72 cores, one thread each, 4 GPUs: its real nvidia-smi topo -m, whose NUMA Affinity
lists GPU-memory nodes; slurmd gets a synthetic topology of the same shape, and lscpu -p is
hand-written as tests/grace_support.py says, none having been published).

The nvidia-smi --query-gpu output of each machine is TEST-BUILT here (nvidia-smi cannot run
without a GPU): from the hwloc export's PCI devices and their NVML GPUModel names, or, for delos,
as tests/test_derive.py builds it.
"""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree

import pytest
from grace_support import gb200

from conftest import capture_dir, run_cli
from provision.facts import hwloc
from provision.facts.cpulist import parse_cpulist
from provision.facts.nvidia import parse_topo_matrix
from slurm_support import OFFLINE_CONF, ensure_slurm_image, run_in_slurm_image

pytestmark = pytest.mark.cluster

HWLOC = Path(__file__).resolve().parent / "fixtures" / "hwloc"
XML_TOPOLOGIES = {
    "minsky": ("power8-minsky-gpus.xml", "ppc64le"),
    "dgx2": ("nvidia-dgx2.xml", "x86_64"),
    "xeon24": ("xeon-2n6c2t-pci.v2.xml", "x86_64"),
}
NAMES = ("delos", "gb200", *XML_TOPOLOGIES)
SYNTHETIC = ("delos", "gb200")  # slurmd gets lstopo's synthetic topology of the machine
# slurmd 22.05 maps only OS CPU numbers below its CPU count (xcpuinfo's block map): the two exports
# restricted to a few PUs (OS numbers up to 105 on 16 CPUs) are checked on the CPUs it maps, and by
# socket; the others CPU by CPU.
CONTIGUOUS = ("delos", "gb200", "xeon24")
# delos: socket s, core c, thread t is CPU 20·s + c + 40·t (its numactl -H); lstopo's synthetic
# topology takes the PUs' OS indexes in logical order.
DELOS_PUS = ",".join(str(20 * s + c + 40 * t) for s in range(2) for c in range(20) for t in range(2))
GRES_LINE = re.compile(r"Gres Name=gpu Type=(\S+) Count=1 Index=(\d+) ID=\d+ File=(\S+) Cores=(\S+) CoreCnt=\d+")
MAP_LINE = re.compile(r"CPU map\[(\d+)\]=>(\d+) S:C:T (\d+):(\d+):(\d+)")
SHAPE_LINE = re.compile(r"CPUs:(\d+) Boards:\d+ Sockets:(\d+) CoresPerSocket:(\d+) ThreadsPerCore:(\d+)")


def _xml_gpus(text: str) -> list[tuple[str, str]]:
    """[(bus id, model)] of the NVIDIA GPUs in an hwloc export, in nvidia-smi's order (PCI bus id)."""
    gpus = []
    for device in ElementTree.fromstring(text).iter("object"):
        if device.get("type") != "PCIDev" or "[10de:" not in device.get("pci_type", ""):
            continue
        if not device.get("pci_type", "").startswith(("0300", "0302")):
            continue
        models = [
            info.get("value") for osdev in device.iter("object") for info in osdev.iter("info") if info.get("name") == "GPUModel"
        ]
        pci_id = re.search(r"\[(10de:[0-9a-f]{4})\]", device.get("pci_type")).group(1)
        gpus.append((device.get("pci_busid"), models[0] if models else f"NVIDIA {pci_id}"))
    return sorted(gpus)


def _query(gpus: list[tuple[str, str]]) -> str:
    return "".join(f"{index}, {model}, {bus}, [N/A]\n" for index, (bus, model) in enumerate(gpus))


def _captures(name: str, meminfo: str) -> tuple[dict[str, str], dict[int, set[int]]]:
    """provision's captures of one machine and, per GPU index, the CPUs the hardware puts next to it."""
    common = {"hostname": f"{name}\n", "meminfo": meminfo}
    if name == "delos":
        captures = capture_dir("delos-x86-4gpu")
        rows = [f"{cpu},{cpu % 40},{(cpu % 40) // 20},{(cpu % 40) // 20}" for cpu in range(80)]
        captures["lscpu-p"] = "# CPU,Core,Socket,Node\n" + "\n".join(rows) + "\n"
        captures["nvidia-smi-query"] = "".join(
            f"{i}, Tesla V100-SXM2-32GB, 00000000:{i + 1:02x}:00.0, 32510 MiB\n" for i in range(4)
        )
        near = {a.index: set(a.cpus) for a in parse_topo_matrix(captures["nvidia-smi-topo"])}
        return {**captures, **common, "uname-m": "x86_64\n"}, near
    if name == "gb200":
        captures = gb200()
        return {**captures, **common}, {a.index: set(a.cpus) for a in parse_topo_matrix(captures["nvidia-smi-topo"])}
    xml_file, arch = XML_TOPOLOGIES[name]
    text = (HWLOC / xml_file).read_text()
    gpus = _xml_gpus(text)
    local = {gpu.bus_id: set(gpu.pus) for gpu in hwloc.parse_hwloc_xml(text).gpus}
    near = {index: local[bus] for index, (bus, _) in enumerate(gpus)}
    return {**common, "hwloc-xml": text, "nvidia-smi-query": _query(gpus), "uname-m": f"{arch}\n"}, near


def _packages(name: str, out: Path) -> tuple[hwloc.HwlocPackage, ...]:
    """The machine's packages (sockets) as hwloc numbers them, from the topology slurmd was given."""
    return hwloc.parse_hwloc_xml((out / "topology.xml").read_text()).packages


def _cpus_form(gres_conf: str, near: dict[int, set[int]]) -> str:
    """The same gres.conf written the old way: CPUs= with the OS CPU numbers nvidia-smi topo -m prints."""
    lines = []
    for line in gres_conf.splitlines():
        match = re.search(r"File=/dev/nvidia(\d+) Cores=\S+", line)
        if match:
            cpus = ",".join(map(str, sorted(near[int(match.group(1))])))
            line = line[: match.start()] + f"File=/dev/nvidia{match.group(1)} CPUs={cpus}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def _slurmd_reading(output: str, cores: str) -> set[int]:
    """The machine CPUs slurmd binds ``Cores=cores`` to, by slurmd's own CPU map in ``output``."""
    threads = int(SHAPE_LINE.search(output).group(4))
    wanted = set(parse_cpulist(cores, "Cores="))
    return {int(m.group(2)) for m in MAP_LINE.finditer(output) if int(m.group(1)) // threads in wanted}


@pytest.fixture(scope="module")
def slurmd_runs(tmp_path_factory):
    """Every topology through provision and then slurmd -C / -G: {name: (its folder, CPUs near each GPU)}."""
    ensure_slurm_image()
    work = tmp_path_factory.mktemp("gres-slurmd")
    for name in SYNTHETIC:
        (work / name).mkdir()
    first = run_in_slurm_image(
        "cat /proc/meminfo >/work/meminfo.txt;"
        f" lstopo-no-graphics -i 'pack:2 [numa] core:20 pu:2(indexes={DELOS_PUS})' --of xml /work/delos/topology.xml;"
        " lstopo-no-graphics -i 'pack:2 [numa] core:72 pu:1' --of xml /work/gb200/topology.xml",
        work,
    )
    assert first.returncode == 0, first.stderr
    meminfo = (work / "meminfo.txt").read_text()
    nears: dict[str, dict[int, set[int]]] = {}
    for name in NAMES:
        folder = work / "cap" / name
        folder.mkdir(parents=True)
        captures, near = _captures(name, meminfo)
        for capture, text in captures.items():
            (folder / f"{capture}.txt").write_text(text)
        (work / name).mkdir(exist_ok=True)
        if name not in SYNTHETIC:
            (work / name / "topology.xml").write_text((HWLOC / XML_TOPOLOGIES[name][0]).read_text())
        nears[name] = near
    probe = run_cli("probe", "--replay", str(work / "cap"), "--facts-dir", str(work / "facts"))
    assert probe.returncode == 0, probe.stdout + probe.stderr
    for name in NAMES:
        out = work / name
        made = run_cli(
            "slurm-gres",
            name,
            "--facts-dir",
            str(work / "facts"),
            "-o",
            str(out / "gres.conf"),
            "--slurm-conf",
            str(out / "nodes.conf"),
        )
        assert made.returncode == 0, made.stderr
        assert "warning" not in made.stderr, made.stderr
        (out / "slurm.conf").write_text(
            OFFLINE_CONF
            + "SlurmdDebug=debug4\nSlurmdSpoolDir=/var/spool/slurmd\n"
            + (out / "nodes.conf").read_text()
            + "PartitionName=all Nodes=ALL\n"
        )
        near = nears[name]
        (out / "gres-cpus.conf").write_text(_cpus_form((out / "gres.conf").read_text(), near))
        gpus = len(near)
        done = run_in_slurm_image(
            f"cd /work/{name}; i=0; while [ $i -lt {gpus} ]; do mknod /dev/nvidia$i c 195 $i; i=$((i + 1)); done;"
            " mkdir -p /var/spool/slurmd; cp slurm.conf /etc/slurm/slurm.conf; export HWLOC_XMLFILE=$PWD/topology.xml;"
            " slurmd -V >version.txt; slurmd -C >C.txt;"
            " cp gres.conf /etc/slurm/gres.conf; slurmd -D -G >G.txt 2>&1;"
            " cp gres-cpus.conf /etc/slurm/gres.conf; slurmd -D -G >G-cpus.txt 2>&1",
            work,
            hostname=name,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    return {name: (work / name, nears[name]) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_slurmd_C_prints_our_node_line(slurmd_runs, name):
    out, _ = slurmd_runs[name]
    ours = [line for line in (out / "nodes.conf").read_text().splitlines() if line.startswith("NodeName=")]
    real = (out / "C.txt").read_text().splitlines()[0]
    assert len(ours) == 1 and re.sub(r" Gres=\S+$", "", ours[0]) == real, (out / "version.txt").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_slurmd_G_accepts_our_gres_conf_and_binds_each_gpu_to_its_own_cpus(slurmd_runs, name):
    out, near = slurmd_runs[name]
    output = (out / "G.txt").read_text()
    assert "error" not in output.lower(), output[-3000:]
    listed = GRES_LINE.findall(output)
    ours = re.findall(r"Type=(\S+) File=(\S+) Cores=(\S+)", (out / "gres.conf").read_text())
    assert [(kind, path, cores) for kind, _, path, cores in listed] == ours
    assert len(listed) == len(near) and [int(index) for _, index, _, _ in listed] == sorted(near)
    shape = SHAPE_LINE.search(output)
    cores_per_socket, sockets = int(shape.group(3)), int(shape.group(2))
    mapped = {int(m.group(2)) for m in MAP_LINE.finditer(output)}
    package_of = {pu: p.logical_index for p in _packages(name, out) for core in p.cores for pu in core.pus}
    for _, index, _, cores in listed:
        assert _slurmd_reading(output, cores) == near[int(index)] & mapped, f"GPU {index}: Cores={cores}"
        # slurmd's abstract core k sits on socket k // CoresPerSocket: the GPU's own package.
        assert {core // cores_per_socket for core in parse_cpulist(cores, "Cores=")} == {
            package_of[pu] for pu in near[int(index)]
        } and sockets == len(set(package_of.values()))
    if name in CONTIGUOUS:
        assert mapped == set(package_of), "slurmd maps every CPU of this machine"


@pytest.mark.parametrize("name", [name for name in NAMES if name != "gb200"])
def test_the_old_CPUs_form_is_refused_by_slurmd(slurmd_runs, name):
    """OS CPU numbers under CPUs= are read as core indexes: each past the last core is refused."""
    out, near = slurmd_runs[name]
    output = (out / "G-cpus.txt").read_text()
    shape = SHAPE_LINE.search(output)
    cores = int(shape.group(2)) * int(shape.group(3))
    refused = re.findall(r"error: Invalid GRES data for gpu, CPUs=(\S+)", output)
    expected = [",".join(map(str, sorted(cpus))) for _, cpus in sorted(near.items()) if max(cpus) >= cores]
    assert refused == expected and refused, output[-3000:]


def test_on_grace_the_old_CPUs_form_happens_to_bind_right(slurmd_runs):
    """One thread per core, CPUs numbered in core order: OS CPU numbers are the logical core indexes,
    so ``CPUs=72-143`` is accepted and binds GPU 2's own Grace (the Cores= form stays the one written)."""
    out, near = slurmd_runs["gb200"]
    output = (out / "G-cpus.txt").read_text()
    assert "error" not in output.lower(), output[-3000:]
    listed = re.findall(r"Gres Name=gpu Type=\S+ Count=1 Index=(\d+) ID=\d+ File=\S+ Cores=(\S+)", output)
    assert [(int(index), _slurmd_reading(output, cores)) for index, cores in listed] == sorted(near.items())


def test_small_CPUs_numbers_are_misread_as_core_indexes(tmp_path):
    """On the interleaved Xeon (socket 0 = even CPUs), ``CPUs=0,2,4,6,8,10`` (the first thread of each
    socket-0 core, in OS numbers) is accepted, and slurmd binds the GPU to cores of both sockets."""
    ensure_slurm_image()
    text = (HWLOC / "xeon-2n6c2t-pci.v2.xml").read_text()
    (tmp_path / "topology.xml").write_text(text)
    (tmp_path / "slurm.conf").write_text(
        OFFLINE_CONF + "SlurmdDebug=debug4\nGresTypes=gpu\n"
        "NodeName=xeon24 CPUs=24 Boards=1 SocketsPerBoard=2 CoresPerSocket=6 ThreadsPerCore=2 Gres=gpu:1\n"
    )
    (tmp_path / "gres.conf").write_text("AutoDetect=off\nNodeName=xeon24 Name=gpu File=/dev/nvidia0 CPUs=0,2,4,6,8,10\n")
    done = run_in_slurm_image(
        "mknod /dev/nvidia0 c 195 0; mkdir -p /var/spool/slurmd; cp /work/slurm.conf /work/gres.conf /etc/slurm/;"
        " HWLOC_XMLFILE=/work/topology.xml slurmd -D -G >/work/G.txt 2>&1",
        tmp_path,
        hostname="xeon24",
    )
    assert done.returncode == 0, done.stderr
    output = (tmp_path / "G.txt").read_text()
    assert "error" not in output.lower(), output[-3000:]
    socket0 = {pu for core in hwloc.parse_hwloc_xml(text).packages[0].cores for pu in core.pus}
    reading = _slurmd_reading(output, "0,2,4,6,8,10")
    assert reading - socket0, "slurmd should have bound some of socket 1's CPUs"
    assert reading != socket0 and len(reading) == 12
