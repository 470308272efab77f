"""Facts for a plan: read from the facts folder, or probed now with one ProbeSettings object."""

import pytest
from test_connection import blackhole

from provision.errors import FactsError
from provision.probe.cached import ProbeFailed, ProbeSettings, plan_facts
from provision.probe.store import load_host
from provision.transport.options import SshOptions


def test_reads_the_facts_folder_without_probing(tmp_path):
    with pytest.raises(FactsError, match="ghost"):
        plan_facts(["ghost"], None, tmp_path, None)


def test_probes_with_the_settings_saves_the_good_and_names_the_failed(tmp_path):
    inventory = tmp_path / "hosts.yml"
    with blackhole() as port:
        inventory.write_text(f"hosts:\n  hole: {{address: 127.0.0.1, port: {port}}}\n")
        settings = ProbeSettings(SshOptions(connect_timeout=0.5, known_hosts=tmp_path / "kh"), forks=2)
        with pytest.raises(ProbeFailed) as error:
            plan_facts(["localhost", "hole"], inventory, tmp_path / "facts", settings)
    assert "hole (timeout: no SSH answer within 0.5s)" in str(error.value) and "localhost" not in str(error.value)
    assert load_host(tmp_path / "facts", "localhost").host == "localhost"  # the host that answered is saved


def test_probe_settings_default_is_the_ssh_defaults():
    assert ProbeSettings().ssh == SshOptions() and ProbeSettings().forks == 64
