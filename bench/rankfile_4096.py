#!/usr/bin/env python3
"""Benchmark: a rank file for 4096 hosts x 8 GPUs (32768 ranks) from synthetic facts. Target < 1 s.

The facts are built from a real capture (tests/fixtures/captures/epyc7451: 2 x 24 cores, SMT2)
with 8 GPUs, 4 per socket, renamed for each host; planning and rendering are timed, not setup.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from provision.facts.derive import derive_facts  # noqa: E402
from provision.facts.model import Gpu  # noqa: E402
from provision.plans.dims import parse_dims  # noqa: E402
from provision.plans.rankfile import plan_rankfile, render_rankfile  # noqa: E402
from provision.probe.store import read_capture_dir  # noqa: E402


def main() -> None:
    base = derive_facts("base", read_capture_dir(ROOT / "tests/fixtures/captures/epyc7451"))
    gpus = tuple(Gpu(i, "H100", f"0000:{i + 1:02x}:00.0", 81559, None, i // 4, "synthetic") for i in range(8))
    dims = parse_dims("8x64x64")
    facts = [dataclasses.replace(base, host=f"n{i:05d}", hostname=f"n{i:05d}", gpus=gpus) for i in range(dims.hosts)]
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        text = render_rankfile(plan_rankfile(dims, facts), "bench")
        timings.append(time.perf_counter() - started)
    ranks = sum(1 for line in text.splitlines() if line.startswith("rank "))
    print(
        f"rank file 8x64x64: {dims.hosts} hosts, {ranks} ranks, {len(text) / 1e6:.1f} MB; "
        f"median {statistics.median(timings):.3f} s, best {min(timings):.3f} s (target < 1 s)"
    )


if __name__ == "__main__":
    main()
