#!/usr/bin/env python3
"""Benchmark: `provision inventory import` of a large Ansible inventory (must stay linear).

Builds INI inventories like a real cluster's: racks ``rack01..rackNN`` of ``node[...]`` host
lines with per-host ``ansible_host``, a ``gpu:children`` group of every rack, ``[all:vars]``;
then times import + YAML output (what the command does, without process start-up) and
prints the time per host, so a quadratic step shows as a growing figure.

    python3 bench/inventory_import_1024.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provision.inventory.ansible import import_ansible_inventory  # noqa: E402
from provision.inventory.model import inventory_to_yaml  # noqa: E402


def ansible_ini(hosts: int, racks: int) -> str:
    """An INI inventory of ``hosts`` hosts in ``racks`` racks, with group vars and children."""
    per_rack = hosts // racks
    lines = []
    for rack in range(racks):
        lines.append(f"[rack{rack + 1:03d}]")
        for slot in range(per_rack):
            index = rack * per_rack + slot
            lines.append(f"node{index:05d} ansible_host=10.{index // 65536}.{index // 256 % 256}.{index % 256} gpus=4")
        lines.append(f"[rack{rack + 1:03d}:vars]\nswitch=sw{rack + 1:03d}")
    lines.append("[gpu:children]")
    lines += [f"rack{rack + 1:03d}" for rack in range(racks)]
    lines.append("[all:vars]\nansible_user=mpi\nansible_port=22")
    return "\n".join(lines) + "\n"


def time_import(hosts: int, racks: int) -> tuple[float, int]:
    """Seconds to import and serialise; the number of hosts read (checked)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hosts.ini"
        path.write_text(ansible_ini(hosts, racks))
        started = time.perf_counter()
        inventory = import_ansible_inventory(path)
        inventory_to_yaml(inventory)
        elapsed = time.perf_counter() - started
    if len(inventory.hosts) != hosts or len(inventory.racks) != racks:
        raise SystemExit(f"wrong result: {len(inventory.hosts)} hosts, {len(inventory.racks)} racks")
    return elapsed, hosts


def main() -> None:
    print(f"{'hosts':>6} {'racks':>6} {'seconds':>8} {'us/host':>8} {'per-host vs 1024':>17}")
    base = None
    for hosts, racks in ((1024, 32), (8192, 32), (8192, 256)):
        best = min(time_import(hosts, racks)[0] for _ in range(3))
        per_host = best / hosts
        base = base or per_host
        print(f"{hosts:>6} {racks:>6} {best:>8.3f} {per_host * 1e6:>8.0f} {per_host / base:>16.2f}x", flush=True)
    print("target: 1024 hosts / 32 racks well under 0.5 s; per-host time about 1x as hosts grow (linear)")


if __name__ == "__main__":
    main()
