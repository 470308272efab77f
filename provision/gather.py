"""What `provision probe` runs on a host: one POSIX sh script, one round trip.

Each step is a fixed command (no user value ever goes into it). The streamed output is framed
with a random nonce per run, so no command output can forge a frame.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from provision import __version__
from provision.errors import ParseError
from provision.resources import render

NOT_INSTALLED = 127


@dataclass(frozen=True)
class Step:
    """One capture: its file name, the tools it needs, the shell it runs, what it is for."""

    name: str
    needs: tuple[str, ...]
    script: str
    describe: str


_OPENMPI = (
    "echo '# dpkg-query'; "
    "if command -v dpkg-query >/dev/null 2>&1; then "
    "dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' '*openmpi*' 2>/dev/null; fi; "
    "echo '# rpm'; "
    "if command -v rpm >/dev/null 2>&1; then rpm -qa --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n' '*openmpi*' 2>/dev/null; fi; "
    "echo '# ompi_info'; "
    # built_with_cuda_support is a compile-time constant of OpenMPI's core (OPAL_CUDA_SUPPORT), so
    # ompi_info can skip loading its ~120 components: ~10 ms instead of ~250 ms per node.
    "if command -v ompi_info >/dev/null 2>&1; then mkdir -p \"$t/no-components\"; "
    "OMPI_MCA_mca_base_component_path=\"$t/no-components\" ompi_info --parsable --all 2>/dev/null "
    "| grep -E '^(ompi:version:full:|mca:(mpi|opal):base:param:(mpi|opal)_built_with_cuda_support:value:)'; fi; true"
)

# `read` is a shell builtin: no process per file, which matters on 160-CPU POWER nodes.
_SYSFS_CPU = (
    "for d in /sys/devices/system/cpu/cpu[0-9]*; do "
    "n=${d##*/cpu}; on=1; "
    '[ -r "$d/online" ] && read -r on <"$d/online"; '
    '[ "$on" = 0 ] && continue; '
    '[ -r "$d/topology/core_id" ] || continue; '
    'read -r core <"$d/topology/core_id"; pkg=-1; read -r pkg <"$d/topology/physical_package_id"; '
    "node=; for l in \"$d\"/node[0-9]*; do [ -e \"$l\" ] && node=${l##*/node}; done; "
    'echo "$n,$core,$pkg,$node"; '
    "done; "
    # Which CPUs share a core and a package, as hwloc reads them: core_id and the package id alone
    # mislead (hybrid ARM restarts core_id per cluster; POWER LPARs give package id -1). One grep
    # for all CPUs: these lists are binary attributes that dash's byte-wise `read` gets empty.
    'if [ -r "$d/topology/core_cpus_list" ]; then a=core_cpus_list; b=package_cpus_list; '
    "else a=thread_siblings_list; b=core_siblings_list; fi; "
    'grep -H . /sys/devices/system/cpu/cpu[0-9]*/topology/"$a" /sys/devices/system/cpu/cpu[0-9]*/topology/"$b" '
    "2>/dev/null; true"
)

_SYSFS_GPU = (
    "for d in /sys/bus/pci/devices/*; do "
    'vendor=; read -r vendor <"$d/vendor" 2>/dev/null; [ "$vendor" = 0x10de ] || continue; '
    'read -r class <"$d/class"; case "$class" in 0x0300*|0x0302*) ;; *) continue;; esac; '
    'node=-1; read -r node <"$d/numa_node" 2>/dev/null; '
    'echo "${d##*/} $node"; '
    "done"
)

STEPS: tuple[Step, ...] = (
    Step("hostname", ("hostname",), "hostname", "the name the host calls itself"),
    Step("uname-m", ("uname",), "uname -m", "machine architecture"),
    Step("numactl-H", ("numactl",), "numactl -H", "NUMA nodes and their CPUs"),
    Step("ppc64_cpu-info", ("ppc64_cpu",), "ppc64_cpu --info", "POWER cores and online threads"),
    Step("lscpu", ("lscpu",), "lscpu", "CPU summary"),
    Step("lscpu-p", ("lscpu",), "lscpu -p=CPU,CORE,SOCKET,NODE", "online CPUs with core, socket, node"),
    Step("sysfs-cpu", ("sh",), _SYSFS_CPU, "fallback topology from /sys/devices/system/cpu"),
    Step(
        "hwloc-xml",
        ("sh",),
        # hwloc's view is what OpenMPI binds by. Its CPU and PCI discovery is enough: skip the x86
        # CPUID pass (it binds to every PU in turn) and the GL/OpenCL/CUDA/NVML/RSMI/Level Zero
        # plugins (driver start-up, seconds on GPU nodes); GPUs stay visible as PCI devices.
        # --no-caches (hwloc 1.11 to 3.x) halves the XML and changes no package or core numbering.
        "if command -v lstopo-no-graphics >/dev/null 2>&1; then l=lstopo-no-graphics; else l=hwloc-ls; fi; "
        'HWLOC_COMPONENTS=-x86,-gl,-opencl,-cuda,-nvml,-rsmi,-levelzero "$l" --no-caches --of xml',
        "hwloc's topology, as OpenMPI numbers sockets and cores (lstopo-no-graphics or hwloc-ls)",
    ),
    Step(
        "nvidia-smi-query",
        ("nvidia-smi",),
        "nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total --format=csv,noheader",
        "GPUs",
    ),
    Step("nvidia-smi-topo", ("nvidia-smi",), "nvidia-smi topo -m", "GPU to CPU/NUMA affinity"),
    Step("sysfs-gpu", ("sh",), _SYSFS_GPU, "fallback GPU NUMA node from sysfs"),
    Step("openmpi", ("sh",), _OPENMPI, "installed OpenMPI packages, version, CUDA support"),
    Step("meminfo", ("cat",), "cat /proc/meminfo", "memory"),
    Step("ip-addr", ("ip",), "ip -o addr show", "interface addresses"),
    Step("ip-link", ("ip",), "ip -o link show", "interface state"),
)

CAPTURE_NAMES = tuple(step.name for step in STEPS)


@dataclass(frozen=True)
class Capture:
    """One step's result on one host."""

    name: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def available(self) -> bool:
        """True when the command ran and succeeded."""
        return self.exit_code == 0

    def why_unavailable(self) -> str:
        """A short reason for a failed or missing command."""
        if self.exit_code == NOT_INSTALLED:
            return "not installed"
        first = self.stderr.strip().splitlines()[0] if self.stderr.strip() else ""
        return f"exit {self.exit_code}" + (f": {first[:120]}" if first else "")


def new_nonce() -> str:
    """A fresh random frame marker for one run."""
    return secrets.token_hex(8)


def gather_script(nonce: str) -> str:
    """The one script `provision probe` runs on a host, framing each output with ``nonce``."""
    return render("gather.sh.j2", mode="stream", steps=STEPS, nonce=nonce, version=__version__)


def capture_script() -> str:
    """The stand-alone script a user runs on a node to write ``DIR/<hostname>/<name>.txt`` files."""
    return render("gather.sh.j2", mode="dir", steps=STEPS, nonce="", version=__version__)


def split_output(text: str, nonce: str) -> dict[str, Capture]:
    """Split the framed output of :func:`gather_script` into captures by name.

    Each step is ``@@N@@ name`` + stdout + ``@@N@@ .rc CODE`` + stderr (only on failure).
    Raises :class:`ParseError` (source ``probe``) when the framing is broken, e.g. the
    connection dropped half way.
    """
    marker = re.compile(rf"^@@{re.escape(nonce)}@@ (\S+)(?: (\d+))?\n", re.MULTILINE)
    matches = list(marker.finditer(text))
    if not matches:
        raise ParseError("probe", "no framed output: the remote shell printed something else (is /bin/sh POSIX?)")
    captures: dict[str, Capture] = {}
    pending: tuple[str, str] | None = None
    for position, match in enumerate(matches):
        end = matches[position + 1].start() if position + 1 < len(matches) else len(text)
        body = text[match.end():end]
        body = body[:-1] if body.endswith("\n") else body  # the newline the frame added
        name, code = match.group(1), match.group(2)
        if name == ".rc":
            if pending is None or code is None:
                raise ParseError("probe", "exit-code frame without a command frame")
            captures[pending[0]] = Capture(pending[0], int(code), pending[1], body)
            pending = None
        else:
            if pending is not None:
                raise ParseError("probe", f"output of {pending[0]} has no exit code: connection dropped?")
            pending = (name, body)
    if pending is not None:
        raise ParseError("probe", f"output ended inside {pending[0]}: connection dropped?")
    missing = [name for name in CAPTURE_NAMES if name not in captures]
    if missing:
        raise ParseError("probe", f"output is missing {', '.join(missing)}")
    return captures
