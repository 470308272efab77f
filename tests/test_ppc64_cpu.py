"""ppc64_cpu --info parser: seed (unpadded) and real padded outputs, SMT off, offline cores."""

import pytest

from conftest import read_fixture
from provision.errors import ParseError
from provision.facts.ppc64_cpu import parse_ppc64_cpu_info


def test_seed_minsky_unpadded_20_cores_smt8():
    cores = parse_ppc64_cpu_info(read_fixture("captures", "minsky", "ppc64_cpu-info.txt"))
    assert len(cores) == 20
    assert cores[19].core_id == 19 and cores[19].online == tuple(range(152, 160))


def test_real_padded_output_smt4():
    cores = parse_ppc64_cpu_info(read_fixture("outputs", "ppc64_cpu", "ppc64_cpu-info.smt4.txt"))
    assert [c.online for c in cores][3] == (12, 13, 14, 15)


def test_offline_cores_have_no_online_threads():
    cores = parse_ppc64_cpu_info(read_fixture("outputs", "ppc64_cpu", "ppc64_cpu-info.one-core-on.txt"))
    assert [len(c.online) for c in cores] == [4, 0, 0, 0]
    assert cores[1].threads == (4, 5, 6, 7)


def test_smt2_and_mixed_smt():
    smt2 = parse_ppc64_cpu_info(read_fixture("outputs", "ppc64_cpu", "ppc64_cpu-info.smt2-one-core.txt"))
    assert smt2[0].online == (0, 1)
    mixed = parse_ppc64_cpu_info(read_fixture("outputs", "ppc64_cpu", "ppc64_cpu-info.mixed-smt.txt"))
    assert [len(c.online) for c in mixed] == [4, 8]


@pytest.mark.parametrize("text", ["", "Core 0: 0* x*\n", "Cpu 0: 0*\n", "Core 0:\n", "Core 0: 0*\nCore 0: 1*\n"])
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError, match="ppc64_cpu-info"):
        parse_ppc64_cpu_info(text)
