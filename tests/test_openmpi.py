"""OpenMPI capture parser: seed's dpkg -l, dpkg-query, rpm, ompi_info."""

import pytest

from conftest import read_fixture
from provision.errors import ParseError
from provision.facts.openmpi import parse_openmpi


def test_seed_ibm_cuda_build_from_dpkg_l():
    mpi = parse_openmpi(read_fixture("captures", "minsky", "openmpi.txt"))
    assert mpi.version == "2.0.1" and mpi.cuda_aware is True and mpi.source == "dpkg -l"
    assert "openmpi-bin-cuda" in mpi.packages and "openmpi-doc-cuda" not in mpi.packages


def test_debian_container_capture_uses_ompi_info():
    mpi = parse_openmpi(read_fixture("captures", "node-container", "openmpi.txt"))
    assert mpi.version.startswith("4.1") and mpi.cuda_aware is False and mpi.source == "ompi_info" and mpi.major == 4


def test_rpm_and_uninstalled_dpkg_rows():
    text = "# dpkg-query\nopenmpi-bin\t\tun \n# rpm\nopenmpi\t4.1.1-5.el8\n# ompi_info\n"
    mpi = parse_openmpi(text)
    assert (mpi.version, mpi.source, mpi.packages) == ("4.1.1", "rpm", ("openmpi",))


def test_nothing_installed():
    mpi = parse_openmpi("# dpkg-query\n# rpm\n# ompi_info\n")
    assert mpi.version is None and mpi.major is None


def test_garbage():
    with pytest.raises(ParseError, match="openmpi"):
        parse_openmpi("# rpm\nthis is not rpm output at all\n")


def test_opal_built_with_cuda_support_key_is_read_too():
    text = (
        "# dpkg-query\n# rpm\n# ompi_info\nompi:version:full:5.0.3\nmca:opal:base:param:opal_built_with_cuda_support:value:true\n"
    )
    mpi = parse_openmpi(text)
    assert (mpi.version, mpi.cuda_aware, mpi.major) == ("5.0.3", True, 5)


def test_a_whole_ompi_info_output_reads_the_same_as_its_two_lines():
    # 895 real lines (the openmpi step on a test node): the lines that hold neither key are skipped
    # without being parsed, and must not change the result (issue 28: 2 ms -> 0.15 ms per node)
    whole = read_fixture("outputs", "ompi_info", "level4-openmpi-4.1.4-bookworm.txt")
    kept = [line for line in whole.splitlines() if line.startswith(("#", "ompi:version:full:")) or "_cuda_support:value:" in line]
    assert len(kept) < 10 < len(whole.splitlines())
    assert parse_openmpi(whole) == parse_openmpi("\n".join(kept)) == parse_openmpi(whole.replace("\n", "\r\n"))
    assert (parse_openmpi(whole).version, parse_openmpi(whole).cuda_aware) == ("4.1.4", False)


def test_a_section_after_ompi_info_is_still_seen():
    text = "# ompi_info\nmca:a:b:param:x:value:1\n  # rpm\nopenmpi\t4.1.1-5.el8\n"
    assert parse_openmpi(text).source == "rpm"
