"""The service below rankfile, launch and topology (provision.plans.service): which hosts, their
facts from the facts folder, the rank plan; nothing printed, every refusal a ProvisionError."""

from __future__ import annotations

import pytest

from plan_support import minsky
from provision.errors import FactsError, InventoryError, PlanError
from provision.inventory.model import open_inventory
from provision.plans.service import PlanRequest, candidate_hosts, rank_plan
from provision.probe.store import save_hosts

INVENTORY = """\
racks:
  - {name: r1, hosts: [m1, m2]}
  - {name: r2, hosts: [m3, m4]}
hosts: {m1: {}, m2: {}, m3: {}, m4: {}}
"""


@pytest.fixture
def inventory(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text(INVENTORY)
    return path


def test_candidates_are_the_named_hosts_else_the_racks_in_order(inventory, tmp_path):
    inv = open_inventory(inventory)
    assert candidate_hosts(" m3, m1 ,", inv) == ["m3", "m1"]
    assert candidate_hosts(None, inv) == ["m1", "m2", "m3", "m4"]
    with pytest.raises(InventoryError, match="--hosts: host name 'm1;id' may only hold"):
        candidate_hosts("m1;id", inv)
    (tmp_path / "bare.yml").write_text("hosts:\n  m1: {}\n")
    for hosts in (None, " , "):
        with pytest.raises(PlanError, match=r"no hosts: give --hosts h1,h2,\.\.\. or racks in the inventory \(-i\)"):
            candidate_hosts(hosts, open_inventory(tmp_path / "bare.yml"))


def test_rank_plan_reads_the_facts_folder_rack_by_rack(inventory, tmp_path):
    facts_dir = tmp_path / "facts"
    save_hosts(facts_dir, [(minsky(name), {}) for name in ("m1", "m2", "m3", "m4")])
    inv, plan = rank_plan(PlanRequest("4x2x2", inventory=inventory, facts_dir=facts_dir))
    assert inv.rack_order() == ["m1", "m2", "m3", "m4"]
    assert [host.host for host in plan.hosts] == ["m1", "m2", "m3", "m4"]
    assert len(plan.slots()) == 16 and plan.rack_names == ("r1", "r2")
    _, two = rank_plan(PlanRequest("4x1x1", hosts="m3", inventory=inventory, facts_dir=facts_dir))
    assert [host.host for host in two.hosts] == ["m3"]


def test_rank_plan_refuses_before_reading_any_facts(inventory, tmp_path):
    empty = tmp_path / "none"
    with pytest.raises(PlanError, match="dims '4x2': expected XxYxZ"):
        rank_plan(PlanRequest("4x2", inventory=inventory, facts_dir=empty))
    with pytest.raises(FactsError):
        rank_plan(PlanRequest("4x2x2", inventory=inventory, facts_dir=empty))
