"""The GPU↔NIC cells of ``nvidia-smi topo -m`` (the capture :data:`nvidia.SOURCE_TOPO` already makes).

Three shapes are read: newer drivers name NICs ``NIC0``.. in the header and map them to devices
in a ``NIC Legend:`` block after the legend (``  NIC0: mlx5_0``); older drivers put the device
names (``mlx5_0``) in the header themselves; newer ones also underline the header with ANSI
codes. Cells are tab-separated as nvidia-smi prints them; a copy whose tabs became spaces (as
pasted in a ticket) is read by splitting on runs of blanks, the affinity columns coming last.

Hostile or broken output (a GPU row cut off, an unknown cell, a NIC with no legend entry) raises
:class:`ParseError` naming the line: a half-read matrix would pick the wrong NIC silently.
"""

from __future__ import annotations

import re

from provision.errors import ParseError
from provision.facts.model import DISTANCES
from provision.facts.nics import is_name
from provision.facts.nvidia import SOURCE_TOPO
from provision.text import shown_value

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_GPU = re.compile(r"^GPU([0-9]{1,4})\Z")
_NIC = re.compile(r"^NIC([0-9]{1,4})\Z")
_LEGEND_NIC = re.compile(r"^\s*NIC([0-9]{1,4}):\s*(\S+)\s*\Z")
_AFFINITY_HEADERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_CELL = re.compile(r"^(X|NV[0-9]{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)\Z")
MAX_COLUMNS = 1024
MAX_CHARS = 4 * 1024 * 1024


def _header_columns(line: str) -> list[str] | None:
    """The device columns of a header line (GPUn, NICn, mlx5_n...), or None if it is not one."""
    if "GPU0" not in line:
        return None
    for name in _AFFINITY_HEADERS:
        line = line.replace(name, "")
    columns = line.split()
    if not columns or columns[0] != "GPU0":
        return None
    return columns


def parse_gpu_nic_matrix(text: str) -> dict[tuple[int, str], str]:
    """{(GPU index, RDMA device name): class} from ``nvidia-smi topo -m`` (class one of PIX..SYS).

    Empty when the matrix names no NIC. ``SOC`` (drivers before 384) reads as ``SYS``.
    """
    source = SOURCE_TOPO.name
    if len(text) > MAX_CHARS:
        raise ParseError(source, f"output is {len(text)} characters, over the {MAX_CHARS} limit")
    lines = [_ANSI.sub("", raw) for raw in text.splitlines()]
    header: list[str] | None = None
    rows: dict[int, tuple[int, list[str]]] = {}
    legend: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if header is None:
            header = _header_columns(line)
            if header is not None and len(header) > MAX_COLUMNS:
                raise ParseError(source, f"{len(header)} columns, over {MAX_COLUMNS}", number)
            continue
        legend_match = _LEGEND_NIC.match(line)
        if legend_match:
            legend[f"NIC{legend_match.group(1)}"] = legend_match.group(2)
            continue
        cells = line.split()
        if cells and _GPU.match(cells[0]):
            rows[int(cells[0][3:])] = (number, cells[1:])
    if header is None:
        raise ParseError(source, "no header row starting with GPU0")
    nic_columns = [(position, name) for position, name in enumerate(header) if not _GPU.match(name)]
    devices: dict[int, str] = {}
    for position, name in nic_columns:
        device = legend.get(name) if _NIC.match(name) else name
        if device is None:
            raise ParseError(source, f"column {name} has no entry in the NIC Legend")
        if not is_name(device):
            raise ParseError(source, f"column {name}: bad device name {shown_value(device[:40])}")
        devices[position] = device
    links: dict[tuple[int, str], str] = {}
    gpu_columns = [name for name in header if _GPU.match(name)]
    for gpu_name in gpu_columns:
        index = int(gpu_name[3:])
        if index not in rows:
            raise ParseError(source, f"the header names {gpu_name} but there is no {gpu_name} row (output cut off?)")
    for index, (number, cells) in sorted(rows.items()):
        if len(cells) < len(header):
            raise ParseError(source, f"GPU{index} row has {len(cells)} cells for {len(header)} columns (row cut off?)", number)
        for position, device in devices.items():
            cell = cells[position]
            if not _CELL.match(cell) or cell == "X" or cell.startswith("NV"):
                raise ParseError(
                    source, f"GPU{index} to {device}: {shown_value(cell[:20])} is not one of {', '.join(DISTANCES)}", number
                )
            links[(index, device)] = "SYS" if cell == "SOC" else cell
    return links
