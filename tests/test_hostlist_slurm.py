"""provision's hostlists against Slurm's own: `scontrol show hostnames` expands what fold() writes.

scontrol needs no controller for hostlists, only a slurm.conf to read (tests/slurm_support.py).
"""

from __future__ import annotations

import random

import pytest

from provision.plans.hostlist import expand, fold, sorted_hosts
from slurm_support import OFFLINE_CONF, ensure_slurm_image, run_in_slurm_image

pytestmark = pytest.mark.cluster

ADMIN_CASES = [
    [f"node{n:02d}" for n in range(1, 17)],
    ["node01", "node02", "node03", "node07", "gpu8", "gpu9", "gpu10"],
    ["node9", "node10", "node11"],
    ["n099", "n100", "n101", "n105"],
    ["rack1-n01", "rack1-n02", "rack2-n01"],
    ["login", "a", "b"],
]


def _random_cases(count: int) -> list[list[str]]:
    chooser = random.Random(18)  # fixed seed: the same cases every run
    cases = []
    for _ in range(count):
        names = []
        for _ in range(chooser.randint(1, 30)):
            prefix = chooser.choice(["node", "gpu", "r1n", "x-"])
            number, width = chooser.randint(0, 130), chooser.choice([0, 0, 2, 3])
            names.append(f"{prefix}{number:0{width}d}" if width else f"{prefix}{number}")
        cases.append(names)
    return cases


def test_scontrol_expands_our_hostlists_to_the_same_hosts(tmp_path):
    ensure_slurm_image()
    cases = ADMIN_CASES + _random_cases(60)
    (tmp_path / "slurm.conf").write_text(OFFLINE_CONF)
    (tmp_path / "folded.txt").write_text("".join(fold(names) + "\n" for names in cases))
    (tmp_path / "plain.txt").write_text("".join(",".join(sorted_hosts(names)) + "\n" for names in cases))
    script = (
        "cp /work/slurm.conf /etc/slurm/slurm.conf; : >/work/hostnames.txt; : >/work/sorted.txt;"
        " while read -r h; do scontrol show hostnames \"$h\" | tr '\\n' ' ' >>/work/hostnames.txt;"
        " echo >>/work/hostnames.txt; done </work/folded.txt;"
        ' while read -r h; do scontrol show hostlistsorted "$h" >>/work/sorted.txt; done </work/plain.txt'
    )
    done = run_in_slurm_image(script, tmp_path)
    assert done.returncode == 0, done.stderr
    theirs = (tmp_path / "hostnames.txt").read_text().splitlines()
    slurm_sorted = (tmp_path / "sorted.txt").read_text().splitlines()
    assert len(theirs) == len(cases)
    for names, folded, expanded, by_slurm in zip(cases, (fold(n) for n in cases), theirs, slurm_sorted, strict=True):
        assert expanded.split() == sorted_hosts(names) == expand(folded), folded
        assert sorted(expand(by_slurm)) == sorted(set(names)), by_slurm  # our expand reads Slurm's hostlists too
    # The cases an administrator writes come out exactly as Slurm folds them.
    for names, by_slurm in zip(ADMIN_CASES, slurm_sorted, strict=False):
        assert fold(names) == by_slurm
