"""Hosts whose RDMA ports differ from the EPYC capture's the ways a real cluster's do: other names
after a card swap, RoCE instead of InfiniBand, another rate, ports down. Built from
:func:`test_plan_nics.eight_gpu` (8 GPUs, 10 HCAs, the real ``nvidia-smi topo -m`` distances)."""

from __future__ import annotations

import dataclasses

from test_plan_nics import eight_gpu

from conftest import read_fixture
from provision.facts.model import HostFacts
from provision.facts.nics import parse_sysfs_rdma

# a real RoCE port's GID table (RoCE v2 GID at index 3, on ens1f0): mlx5_0 of the roce-2port fixture
ROCE_GIDS = parse_sysfs_rdma(read_fixture("handwritten", "roce-2port", "sysfs-rdma.txt"))[0].ports[0].gids


def card_swapped(facts: HostFacts, shift: int = 1) -> HostFacts:
    """The same host after a card swap: every HCA renamed ``mlx5_i`` -> ``mlx5_(i+shift)`` (mod 10),
    in the sysfs listing and in nvidia-smi's distances alike; nothing else moves."""
    name = {f"mlx5_{i}": f"mlx5_{(i + shift) % 10}" for i in range(10)}
    return dataclasses.replace(
        facts,
        rdma=tuple(dataclasses.replace(d, name=name[d.name]) for d in facts.rdma),
        gpu_nics=tuple(dataclasses.replace(link, device=name[link.device]) for link in facts.gpu_nics),
    )


def with_ports(facts: HostFacts, indexes, **changes) -> HostFacts:
    """``facts`` with port 1 of the HCAs at ``indexes`` (positions in its list) changed: ``rate=``,
    ``link_layer="Ethernet"`` (given a RoCE v2 GID too), ``state=``."""
    if changes.get("link_layer") == "Ethernet":
        changes = {**changes, "gids": ROCE_GIDS}
    rdma = list(facts.rdma)
    for i in indexes:
        rdma[i] = dataclasses.replace(rdma[i], ports=(dataclasses.replace(rdma[i].ports[0], **changes),))
    return dataclasses.replace(facts, rdma=tuple(rdma))


def host(spec: dict) -> HostFacts:
    """A host from a rule case's spec: ``name``, ``down`` (HCA indexes), ``renamed`` (shift),
    ``roce_all`` (every HCA RoCE, with a RoCE v2 GID), ``rate`` ({HCA index: rate})."""
    made = eight_gpu(spec["name"], spec.get("address", "10.0.0.1/24"), down=tuple(spec.get("down", ())))
    if spec.get("roce_all"):
        made = with_ports(made, range(10), link_layer="Ethernet")
    for index, rate in spec.get("rate", {}).items():
        made = with_ports(made, [int(index)], rate=rate)
    return card_swapped(made, spec["renamed"]) if spec.get("renamed") else made
