"""The controller's cache of hosts outside a run, and the checks on what a node claims."""

import json

from provision.engine.membership import (
    HostCache,
    cache_folder,
    cached_hostvars,
    new_hosts_problem,
    record_of,
    verified_key_problem,
)
from provision.inventory.model import Host, Inventory

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHc0Hf9YtWXxg0kd0Q8H2yAJ3Pj4AB"
OTHER = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ7MZi5r4mUDn7n8bWqH7TvkUYn9CD"
FACTS = {"hostname": "s1", "fqdn": "", "short": "s1", "addresses": ["10.0.0.1"], "host_keys": [KEY], "extra": "x"}


def inventory(tmp_path, *names):
    return Inventory(
        hosts={n: Host(n, address="127.0.0.1", port=2200 + i) for i, n in enumerate(names)}, path=tmp_path / "hosts.yml"
    )


def test_cache_round_trip_and_folder(tmp_path):
    inv = inventory(tmp_path, "s1")
    cache = HostCache(cache_folder(inv))
    assert cache.folder == tmp_path / ".provision-cache" / "hosts"
    assert cache.load("s1") is None
    live = {"facts": FACTS, "user_keys": {"results": [{"user": "alice", "public_key": KEY, "item": {"name": "alice"}}]}}
    record = record_of({**live, "inventory_address": "127.0.0.1", "inventory_port": 2200, "nfs_kind": {}}, None, {"user_keys"})
    cache.save({"s1": record})
    loaded = cache.load("s1")
    assert loaded == record and "extra" not in loaded["facts"] and "nfs_kind" not in loaded["registered"]
    assert loaded["registered"]["user_keys"] == {"results": [{"user": "alice", "public_key": KEY}]}  # loop items dropped
    assert (cache.folder.stat().st_mode & 0o777) == 0o700
    (cache.folder / "s2.json").write_text("{not json")
    assert cache.load("s2") is None and cache.load("../s1") is None
    assert HostCache(cache_folder(Inventory())).load("s1") is None  # an ad-hoc inventory keeps nothing


def test_cache_never_through_a_link(tmp_path):
    """Issue 24 finding 2, the same class: the inventory's folder may be shared; a planted
    record link is not believed, a planted cache folder link is refused, nothing written there."""
    import pytest

    from provision.errors import UnsafeFileError

    cache = HostCache(cache_folder(inventory(tmp_path, "s1")))
    cache.save({"s1": {"facts": FACTS, "registered": {}}})
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({"facts": {**FACTS, "addresses": ["10.9.9.9"]}, "registered": {}}))
    (cache.folder / "s2.json").symlink_to(forged)
    assert cache.load("s2") is None and cache.load("s1")["facts"]["addresses"] == ["10.0.0.1"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = HostCache(tmp_path / "linked")
    (tmp_path / "linked").symlink_to(elsewhere)
    with pytest.raises(UnsafeFileError, match="linked: is a link"):
        linked.save({"s1": {"facts": FACTS, "registered": {}}})
    assert list(elsewhere.iterdir()) == []


def test_record_keeps_what_this_run_did_not_register():
    old = {"facts": FACTS, "registered": {"user_keys": {"results": []}, "nfs_kind": {"server": "kernel"}}}
    new = record_of({"facts": FACTS, "user_keys": {"results": [{"user": "a"}]}}, old, {"user_keys", "nfs_kind"})
    assert new["registered"] == {"user_keys": {"results": [{"user": "a"}]}, "nfs_kind": {"server": "kernel"}}
    json.dumps(new)


def test_cached_and_unknown_hostvars():
    record = {"facts": FACTS, "registered": {"user_keys": {"results": []}}}
    cached = cached_hostvars("s1", record, "127.0.0.1", 2200)
    assert cached["cached"] and cached["user_keys"] == {"results": []} and cached["facts"]["host_keys"] == [KEY]
    assert cached["inventory_port"] == 2200
    unknown = cached_hostvars("s2", None, "127.0.0.1", 2201)
    assert unknown["unknown"] and unknown["facts"] == {}


def test_reported_keys_must_include_the_verified_one():
    assert verified_key_problem("s1", FACTS, KEY) is None
    assert verified_key_problem("s1", FACTS, None) is None  # localhost: nothing verified
    problem = verified_key_problem("s1", FACTS, OTHER)
    assert problem.startswith("s1: the host keys it reports (1) do not include ssh-ed25519 key")


def test_limit_to_a_new_host_refused_with_what_to_run(tmp_path):
    inv = inventory(tmp_path, "s1", "s2", "s3", "new")
    cache = HostCache(cache_folder(inv))
    for name in ("s1", "s2", "s3"):
        cache.save({name: {"facts": FACTS, "registered": {}}})
    problem = new_hosts_problem(inv, ["new"], cache, "provision setup-cluster -i hosts.yml")
    assert "new is new to this cluster" in problem and "s1, s2, s3 outside this run would not trust it" in problem
    assert "--limit s1,s2,s3" in problem
    assert new_hosts_problem(inv, ["s1"], cache, "x") is None  # a known host: the others know it already
    assert new_hosts_problem(inv, ["s1", "s2", "s3", "new"], cache, "x") is None  # everyone in the run
