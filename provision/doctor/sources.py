"""The steps doctor adds to probe's gather script, each next to its pure parser.

The script runs as ``sh -s -- JOB_USER [DATASET...]``: the user name and dataset paths (checked
at the edge by :func:`provision.inventory.model.check_user` / :func:`check_dataset`) reach the
steps as positional parameters, never as shell text. Cheap by design: /proc and sysfs reads are builtins, globs list
libraries without running anything; the dataset manifest is one ``find | sort | awk | md5sum``.
"""

from __future__ import annotations

import re
from typing import Any

from provision.doctor.model import GpuHealth, Limits, Manifest, Software
from provision.doctor.mounts import holding_mount, parse_mountinfo
from provision.errors import ParseError, ProvisionError
from provision.facts.registry import Fact
from provision.text import is_number, shown_value

CLOCK_START = Fact("doctor-clock-0", (), "date +%s.%N", "the node's clock as the script starts")
CLOCK_END = Fact("doctor-clock-1", (), "date +%s.%N", "the node's clock as the script ends")
USER = Fact(
    "doctor-user",
    (),
    'echo "login $(id -un) $(id -u)"; '
    'j=${1:-$(id -un)}; if u=$(id -u -- "$j" 2>/dev/null); then echo "job $u $(id -g -- "$j")"; '
    'else echo "job missing"; fi',
    "the login user, and the job user's uid and gid",
)
LIMITS = Fact(
    "doctor-limits",
    (),
    'echo "memlock $(ulimit -l)"; echo "nofile $(ulimit -n)"; '
    'df -Pk /dev/shm 2>/dev/null | { read -r _; read -r _ size _; echo "shm ${size:-none}"; }',
    "this session's memlock and open-file limits, the size of /dev/shm",
)
# Versions from file names and /proc: nothing runs. The inventory's Anaconda prefixes, then the
# conventional ones: the first that exists.
SOFTWARE = Fact(
    "doctor-software",
    (),
    'if [ -r /proc/driver/nvidia/version ]; then read -r l </proc/driver/nvidia/version; echo "driver $l"; fi; '
    "for f in /usr/local/cuda/lib64/libcudart.so.* /usr/local/cuda/targets/*/lib/libcudart.so.*; do "
    '[ -e "$f" ] && echo "cudart ${f##*/}"; done; '
    "for f in /usr/lib/*-linux-gnu/libnccl.so.* /usr/lib64/libnccl.so.* /usr/local/cuda/lib64/libnccl.so.* "
    '/usr/local/nccl/lib/libnccl.so.*; do [ -e "$f" ] && echo "nccl ${f##*/}"; done; '
    # $DOCTOR_CONDA: the inventory's prefixes (checked: letters, digits, ._/+- only), first.
    "for p in $DOCTOR_CONDA /opt/anaconda3 /opt/anaconda2 /opt/anaconda /opt/miniconda3 /opt/miniforge3 /opt/conda; do "
    'for f in "$p"/conda-meta/python-[0-9]*.json; do [ -e "$f" ] && { echo "conda $p ${f##*/}"; break 2; }; done; done; true',
    "NVIDIA driver, CUDA runtime, NCCL, the first Anaconda prefix's Python",
)
GPU_HEALTH = Fact("doctor-nvidia-smi-q", ("nvidia-smi",), "nvidia-smi -q -x", "GPU health (persistence, ECC, pages)")
XID = Fact(
    "doctor-xid",
    ("nvidia-smi", "dmesg"),
    'if k=$(dmesg 2>/dev/null); then echo "# readable"; printf "%s\\n" "$k" | grep "NVRM: Xid" | tail -n 20; '
    'else echo "# unreadable"; fi',
    "recent Xid errors in the kernel log, where it is readable",
)
# One pass over each dataset: count and bytes from awk, the hash of the sorted listing from md5sum.
DATASET = Fact(
    "doctor-dataset",
    (),
    "( shift; head -n 4000 /proc/self/mountinfo 2>/dev/null | sed 's/^/mountinfo /'; "
    'for d in "$@"; do '
    'if [ -d "$d" ]; then echo "dataset $d"; '
    "{ find \"$d\" -type f -printf '%P\\t%s\\t%T@\\n' 2>/dev/null | LC_ALL=C sort | "
    'awk -F \'\\t\' \'BEGIN { OFS = "\\t" } { n++; s += $2; sub(/\\..*/, "", $3); print } '
    'END { printf "count %d %.0f\\n", n, s > "/dev/fd/3" }\' | md5sum | { read -r h _; echo "listing $h"; }; } 3>&1; '
    'if [ "$DOCTOR_DEEP" = 1 ]; then n=$(find "$d" -type f 2>/dev/null | wc -l); '
    "find \"$d\" -type f -printf '%P\\n' 2>/dev/null | LC_ALL=C sort | "
    "awk -v step=$(( n > 0 ? (n + 15) / 16 : 1 )) '(NR - 1) % step == 0' | while IFS= read -r f; do "
    'printf \'%s\\n\' "$f"; head -c 16777216 -- "$d/$f" | md5sum; done | md5sum | { read -r h _; echo "content $h"; }; fi; '
    'else echo "missing $d"; fi; done )',
    "each --dataset folder's manifest: file count, bytes, hash of names+sizes+mtimes; the node's mounts (/proc/self/mountinfo)",
)

# What doctor adds to probe's facts (probe's own are read once: the RDMA ports and each interface's
# MTU come from sysfs-rdma and sysfs-net, in the host's facts).
STEPS: tuple[Fact, ...] = (USER, LIMITS, SOFTWARE, GPU_HEALTH, XID, DATASET)

_PATH = re.compile(r"^/[A-Za-z0-9._/+@%=:,~ -]{0,1000}\Z")


def anaconda_prefixes(variables: Any, hosts: list) -> tuple[str, ...]:
    """The prefixes of the inventory's ``anaconda`` variable (setup-cluster's Anaconda role) for
    ``hosts``, in order, each checked as the role checks it (an unsafe one: ProvisionError naming it)."""
    from provision.operations.conda import check_prefix

    seen: dict[str, None] = {}
    for host in hosts:
        entries = variables.for_host(host).get("anaconda") or []
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("prefix"):
                seen[check_prefix(entry["prefix"], "anaconda prefix (inventory)")] = None
    return tuple(seen)


def check_dataset(path: str) -> str:
    """An absolute dataset path of plain characters, without a trailing slash, else ProvisionError."""
    if not _PATH.match(path) or "/../" in path + "/" or "//" in path:
        raise ProvisionError(f"--dataset {shown_value(path)}: give an absolute path of letters, digits, space and ._/+@%=:,~-")
    return path.rstrip("/") or "/"


def digits(text: str) -> bool:
    """ASCII digits, at most 20 (``'²'.isdigit()`` is True, yet ``int('²')`` raises)."""
    return len(text) <= 20 and is_number(text)


@USER.parses
def parse_user(text: str) -> tuple[str, tuple[int, int] | None, bool]:
    """``(login user, (job uid, gid) or None, job user asked)`` from the doctor-user capture."""
    login, ids, asked = "", None, False
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if len(fields) == 3 and fields[0] == "login":
            login = fields[1]
        elif fields == ["job", "missing"]:
            asked = True
        elif len(fields) == 3 and fields[0] == "job" and digits(fields[1]) and digits(fields[2]):
            asked, ids = True, (int(fields[1]), int(fields[2]))
        elif line.strip():
            raise ParseError(USER.name, f"unexpected line {shown_value(line[:60])}", number)
    return login, ids, asked


def _limit(value: str, source: str) -> int | None:
    if value == "unlimited":
        return None
    if not digits(value):
        raise ParseError(source, f"limit {shown_value(value[:20])} is neither a number nor unlimited")
    return int(value)


@LIMITS.parses
def parse_limits(text: str, source: str = LIMITS.name) -> tuple[Limits, int | None]:
    """``(Limits, /dev/shm KiB or None)`` from ``memlock N``, ``nofile N``, ``shm N`` lines."""
    values = dict(line.split(None, 1) for line in text.splitlines() if len(line.split()) == 2)
    if "memlock" not in values or "nofile" not in values:
        raise ParseError(source, "no 'memlock' and 'nofile' lines")
    shm = values.get("shm", "none")
    return (
        Limits(_limit(values["memlock"], source), _limit(values["nofile"], source)),
        int(shm) if digits(shm) else None,
    )


def _version_of(file_name: str, library: str) -> str:
    """``libnccl.so.2.18.3`` -> ``2.18.3`` (the part after ``LIB.so.``)."""
    return file_name[len(library) + 4 :] if file_name.startswith(library + ".so.") else ""


@SOFTWARE.parses
def parse_software(text: str) -> Software:
    """:class:`Software` from the doctor-software capture (the longest version of each library wins)."""
    driver, cudart, nccl, conda = "", "", "", ""
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "driver":
            match = re.search(r"Kernel Module(?: for [a-z0-9_]+)?\s+([0-9][0-9.]{0,30})", rest)
            driver = match.group(1) if match else rest.strip()[:60]
        elif kind == "cudart":
            version = _version_of(rest.strip(), "libcudart")
            cudart = max(cudart, version, key=lambda v: (v.count("."), v))
        elif kind == "nccl":
            version = _version_of(rest.strip(), "libnccl")
            nccl = max(nccl, version, key=lambda v: (v.count("."), v))
        elif kind == "conda":
            prefix, _, file_name = rest.rpartition(" ")
            match = re.match(r"python-([0-9][0-9.]{0,20}[0-9])-", file_name)
            conda = f"{prefix} python {match.group(1) if match else '?'}"
    return Software(driver, cudart, nccl, conda)


@XID.parses
def parse_xid(text: str) -> tuple[str, ...] | None:
    """Recent Xid lines, or None when the kernel log could not be read."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "# readable":
        return None
    return tuple(line.strip()[:200] for line in lines[1:] if "Xid" in line)


@DATASET.parses
def parse_datasets(text: str, wanted: tuple[str, ...] | None = None) -> tuple[Manifest, ...]:
    """One :class:`Manifest` per wanted path, from the doctor-dataset capture (absent: missing);
    without ``wanted``, one per path the capture names."""
    if wanted is None:
        wanted = tuple(
            dict.fromkeys(line.partition(" ")[2] for line in text.splitlines() if line.startswith(("dataset ", "missing ")))
        )
    found: dict[str, dict] = {}
    current: dict | None = None
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind in ("dataset", "missing"):
            current = {"exists": kind == "dataset"} if rest in wanted else None
            if current is not None:
                found[rest] = current
        elif current is None:
            continue
        elif kind == "count" and re.fullmatch(r"[0-9]{1,18} [0-9]{1,30}", rest):
            current["files"], current["size"] = (int(v) for v in rest.split())
        elif kind == "listing" and re.fullmatch(r"[0-9a-f]{32}", rest):
            current["listing_hash"] = rest
        elif kind == "content" and re.fullmatch(r"[0-9a-f]{32}", rest):
            current["content_hash"] = rest
    mounts = parse_mountinfo("\n".join(line[10:] for line in text.splitlines() if line.startswith("mountinfo ")))
    return tuple(
        Manifest(path, **found[path], mount=holding_mount(mounts, path) if mounts else None)
        if path in found
        else Manifest(path, False)
        for path in wanted
    )


@CLOCK_START.parses
def parse_clock(text: str, source: str = CLOCK_START.name) -> float:
    """Seconds since the epoch from ``date +%s.%N``."""
    value = text.strip()
    if not re.fullmatch(r"[0-9]{1,12}(\.[0-9]{1,9})?", value):
        raise ParseError(source, f"not a time: {shown_value(value[:40])}")
    return float(value)


@CLOCK_END.parses
def parse_clock_end(text: str) -> float:
    """Seconds since the epoch from ``date +%s.%N``, as the script ends."""
    return parse_clock(text, CLOCK_END.name)


def clock_offset(sent: float, node_start: float, node_end: float, received: float) -> tuple[float, float]:
    """The node's clock offset against the controller and its error bound, as NTP computes them.

    ``sent``/``received``: the controller's clock when the script was sent and its output ended;
    ``node_start``/``node_end``: the node's clock as the script started and ended. Offset =
    ((node_start - sent) + (node_end - received)) / 2; the error bound is half the round trip
    that the node's own run time does not explain.
    """
    offset = ((node_start - sent) + (node_end - received)) / 2
    error = max(0.0, (received - sent) - (node_end - node_start)) / 2
    return offset, error


def _flag(element, path: str) -> bool:
    return (element.findtext(path) or "").strip().lower() in ("yes", "true")


def _count(element, path: str) -> int | None:
    value = (element.findtext(path) or "").strip()
    return int(value) if digits(value) else None


def _uncorrected(gpu) -> int | None:
    """Volatile uncorrected ECC errors: ``double_bit/total`` (up to Volta), or SRAM + DRAM
    uncorrectable (Ampere on); None when the GPU reports none (ECC off, N/A)."""
    if gpu.find("ecc_errors/volatile/double_bit") is not None:
        return _count(gpu, "ecc_errors/volatile/double_bit/total")
    counts = [_count(gpu, f"ecc_errors/volatile/{kind}_uncorrectable") for kind in ("sram", "dram")]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


@GPU_HEALTH.parses
def parse_gpu_health(text: str) -> tuple[GpuHealth, ...]:
    """Each GPU's persistence mode, volatile uncorrected ECC count, pending page retirement and
    row remapping from ``nvidia-smi -q -x`` (hostile input: parsed by hwloc's bounded parser)."""
    from provision.facts.hwloc import parse_bounded_xml
    from provision.facts.nvidia import normalise_bus_id

    root = parse_bounded_xml(text, GPU_HEALTH.name)
    gpus = []
    for gpu in root.iter("gpu"):
        persistence = (gpu.findtext("persistence_mode") or "").strip()
        gpus.append(
            GpuHealth(
                bus_id=normalise_bus_id(gpu.get("id", ""), GPU_HEALTH.name),
                persistence=None if persistence not in ("Enabled", "Disabled") else persistence == "Enabled",
                volatile_uncorrected=_uncorrected(gpu),
                retired_pending=_flag(gpu, "retired_pages/pending_retirement") or _flag(gpu, "retired_pages/pending_blacklist"),
                remapped_pending=_flag(gpu, "remapped_rows/remapped_row_pending"),
            )
        )
    return tuple(gpus)
