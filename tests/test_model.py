"""Facts model: JSON round trip and derived properties."""

import json

import pytest

from conftest import capture_dir
from provision.facts.derive import derive_facts
from provision.facts.model import HostFacts


def test_json_round_trip_keeps_everything():
    facts = derive_facts("minsky", capture_dir("minsky"))
    again = HostFacts.from_dict(json.loads(json.dumps(facts.to_dict())))
    assert again == facts
    assert again.cpu.cores_per_socket == 10 and again.cpu.total_cpus == 160


def test_socket_lookups():
    facts = derive_facts("minsky", capture_dir("minsky"))
    assert facts.cpu.socket_of_cpu(85) == 1 and facts.cpu.socket_of_numa_node(1) == 1
    assert facts.cpu.socket_of_numa_node(252) is None


def test_unknown_format_is_rejected():
    data = derive_facts("minsky", capture_dir("minsky")).to_dict()
    data["format"] = 99
    with pytest.raises(ValueError, match="format"):
        HostFacts.from_dict(data)
