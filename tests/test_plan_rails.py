"""Rails compared by place (provision/plans/rails.py): a port's place on its host, in NCCL's order
of devices, and what launch says or refuses when the hosts' rails differ."""

from __future__ import annotations

import dataclasses

from rails_support import card_swapped, with_ports
from test_plan_nics import eight_gpu

from conftest import run_cli
from provision.facts.model import RdmaDevice
from provision.plans.rails import BREAKS, CROSSES, Rail, compare_rails, pci_order, places
from provision.probe.store import save_host


def test_a_place_is_the_gpus_a_port_is_nearest_and_its_rank_among_them():
    found = places(eight_gpu("a"))
    assert found[("mlx5_0", 1)] == ((0, 1), 0) and found[("mlx5_1", 1)] == ((0, 1), 1)
    assert found[("mlx5_7", 1)] == ((6, 7), 1)
    assert found[("mlx5_8", 1)] == ((), 0) and found[("mlx5_9", 1)] == ((), 1)  # SYS from every GPU
    assert places(card_swapped(eight_gpu("b"), 3))[("mlx5_3", 1)] == ((0, 1), 0)


def test_within_a_place_ports_rank_in_pci_order_as_nccl_numbers_them():
    """NCCL sorts a process's devices by PCI address (net_ib/init.cc:483): two hosts whose pair of
    ports near GPUs 0 and 1 carry swapped names still line up by address."""
    a, b = eight_gpu("a"), card_swapped(eight_gpu("b"), 0)
    pci = {f"mlx5_{i}": f"0000:{0x10 + i:02x}:00.0" for i in range(10)}
    a = dataclasses.replace(a, rdma=tuple(dataclasses.replace(d, pci_address=pci[d.name]) for d in a.rdma))
    swapped = {"mlx5_0": "mlx5_1", "mlx5_1": "mlx5_0"}
    b = dataclasses.replace(
        b,
        rdma=tuple(dataclasses.replace(d, name=swapped.get(d.name, d.name), pci_address=pci[d.name]) for d in b.rdma),
        gpu_nics=tuple(dataclasses.replace(link, device=swapped.get(link.device, link.device)) for link in b.gpu_nics),
    )
    assert places(a)[("mlx5_0", 1)] == places(b)[("mlx5_1", 1)] == ((0, 1), 0)
    assert pci_order(RdmaDevice("x", None, None, ())) > pci_order(RdmaDevice("y", "ffff:ff:1f.7", None, ()))
    assert pci_order(RdmaDevice("x", "not an address", None, ()))[0] == (1, 0, 0, 0, 0)


def test_without_any_distance_the_place_is_the_rank_in_pci_order():
    bare = dataclasses.replace(eight_gpu("a"), gpu_nics=())
    assert places(bare)[("mlx5_3", 1)] == (tuple(range(8)), 3)


def test_compare_names_the_usual_hosts_and_bounds_what_it_says():
    rail = Rail("mlx5_0", 1, "InfiniBand", "200", ((0,), 0))
    other = Rail("mlx5_9", 1, "InfiniBand", "200", ((1,), 0))
    rails = {f"n{i:02}": (rail,) for i in range(20)} | {f"m{i:02}": (other,) for i in range(8)}
    usual, differences = compare_rails(rails, {})
    assert usual == [f"n{i:02}" for i in range(20)]
    assert {d.kind for d in differences} == {CROSSES} and len(differences) == 16
    assert differences[0].what == "no rail where n00 has mlx5_0:1 (no port there)"
    usual, differences = compare_rails({"a": (rail,), "b": ()}, {})
    assert usual == ["a"] and [(d.host, d.kind) for d in differences] == [("b", BREAKS)]
    assert compare_rails({"a": (), "b": ()}, {}) == (["a", "b"], [])


def test_cli_launch_refuses_rails_nccl_cannot_connect_in_one_line_and_runs_on_a_card_swap(tmp_path):
    facts = tmp_path / "facts"
    save_host(facts, eight_gpu("a"), {})
    save_host(facts, card_swapped(eight_gpu("b", "10.0.0.2/24")), {})
    args = ("launch", "8x2x1", "--hosts", "a,b", "--facts-dir", str(facts), "--allow-run-as-root")
    done = run_cli(*args, "--", "python", "t.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if not line.startswith("wrote ")] == []  # the same fabric
    wrapper = (tmp_path / "8x2x1.nic.sh").read_text()
    assert "=mlx5_0:1,mlx5_1:1,mlx5_2:1" in wrapper and "=mlx5_1:1,mlx5_2:1,mlx5_3:1" in wrapper
    save_host(facts, with_ports(eight_gpu("b", "10.0.0.2/24"), range(10), link_layer="Ethernet"), {})
    refused = run_cli(*args, "--", "python", "t.py", cwd=tmp_path)
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1 and "Traceback" not in refused.stderr
    assert "b: mlx5_0:1 is Ethernet (RoCE) where a's mlx5_0:1 is InfiniBand" in lines[0]
