"""Facts for plan tests, built from real captures (renamed per host)."""

from __future__ import annotations

import dataclasses

from conftest import capture_dir
from provision.facts.derive import derive_facts
from provision.facts.model import Gpu, HostFacts


def minsky(name: str, gpus: int = 4, gpu_sockets=(0, 0, 1, 1)) -> HostFacts:
    """The seed's Minsky (2 × 10-core POWER8, SMT8) named ``name``, with P100s on the given sockets."""
    facts = derive_facts(name, capture_dir("minsky"))
    devices = tuple(
        Gpu(i, "Tesla P100-SXM2-16GB", f"000{i}:01:00.0", 16280, None, gpu_sockets[i] if gpu_sockets else None, "test")
        for i in range(gpus)
    )
    return dataclasses.replace(facts, hostname=name, gpus=devices)


def eight_core(name: str) -> HostFacts:
    """A Minsky whose chips have 8 cores: the seed's 8-core POWER8 case (cores 8 and 9 of each chip offline)."""
    info = capture_dir("minsky")["ppc64_cpu-info"].splitlines()
    kept = [line if int(line.split()[1].rstrip(":")) % 10 < 8 else line.replace("*", "") for line in info]
    captures = capture_dir("minsky")
    captures["ppc64_cpu-info"] = "\n".join(kept) + "\n"
    facts = derive_facts(name, captures)
    return dataclasses.replace(facts, hostname=name, gpus=minsky(name).gpus)


def seed_rankfile_body(dims: str) -> list[str]:
    """The rank lines (with the blank separators) of the seed's rank_gen output for ``dims``."""
    from conftest import read_fixture

    lines = read_fixture("outputs", "rank_gen", f"{dims}.rf").splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("rank ")) :]
