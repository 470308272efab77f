"""sysfs-cpu parser: real dumps of a hybrid ARM phone, a POWER7 LPAR and a SPARC (package id -1)."""

import pytest

from conftest import capture_dir, read_fixture
from provision.errors import ParseError
from provision.facts.lscpu import parse_lscpu_parsable
from provision.facts.sysfs_cpu import parse_sysfs_cpu, same_grouping


def cores_by_socket(rows):
    groups = {}
    for row in rows:
        groups.setdefault(row.socket, {}).setdefault(row.core, []).append(row.cpu)
    return {socket: sorted(sorted(cpus) for cpus in cores.values()) for socket, cores in groups.items()}


def test_hybrid_arm_cores_from_sibling_lists():
    parsed = parse_sysfs_cpu(read_fixture("captures", "arm-hybrid-a510-x3", "sysfs-cpu.txt"))
    assert parsed.siblings
    # Eight single-thread cores; this kernel reports the three clusters as packages 0, 1, 2.
    assert cores_by_socket(parsed.rows) == {0: [[0], [1], [2]], 1: [[3], [4], [5], [6]], 2: [[7]]}


def test_hybrid_arm_lscpu_merges_cores_and_disagrees_with_sysfs():
    lscpu_rows = parse_lscpu_parsable(read_fixture("captures", "arm-hybrid-a510-x3", "lscpu-p.txt"))
    # lscpu numbers CORE per CPU type: (socket 0, core 0) holds CPUs of four different cores.
    assert cores_by_socket(lscpu_rows) == {0: [[0, 3, 5, 7], [1, 4, 6], [2]]}
    sysfs_rows = parse_sysfs_cpu(read_fixture("captures", "arm-hybrid-a510-x3", "sysfs-cpu.txt")).rows
    assert not same_grouping(lscpu_rows, sysfs_rows)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("power7-lpar-pkg-minus1", {0: [[0, 1, 2, 3]], 1: [[4, 5, 6, 7]], 2: [[8, 9, 10, 11]], 3: [[12, 13, 14, 15]]}),
        ("sparc64-pkg-minus1", {0: [[6]], 1: [[7]], 2: [[10]], 3: [[11]], 4: [[14]], 5: [[15]]}),
    ],
)
def test_package_id_minus_one_uses_package_lists(name, expected):
    parsed = parse_sysfs_cpu(read_fixture("captures", name, "sysfs-cpu.txt"))
    assert cores_by_socket(parsed.rows) == expected
    # Same grouping as util-linux's own lscpu on that dump.
    assert same_grouping(parsed.rows, parse_lscpu_parsable(read_fixture("captures", name, "lscpu-p.txt")))


def test_old_capture_without_lists_still_reads():
    parsed = parse_sysfs_cpu(capture_dir("vm-x86")["sysfs-cpu"])
    assert not parsed.siblings and [(r.cpu, r.core, r.socket) for r in parsed.rows] == [(0, 0, 0), (1, 1, 0)]


def test_old_capture_with_package_minus_one_says_capture_again():
    with pytest.raises(ParseError, match="capture again"):
        parse_sysfs_cpu("0,0,-1,\n1,0,-1,\n")


def test_core_ids_are_kept_when_they_name_each_core_once():
    parsed = parse_sysfs_cpu(read_fixture("captures", "node-hwloc", "sysfs-cpu.txt"))
    assert [(r.cpu, r.core, r.socket, r.node) for r in parsed.rows] == [(0, 0, 0, 0), (1, 1, 0, 0)]


def test_repeated_core_id_in_one_package_falls_back_to_first_cpu():
    # Newer arm64 kernels: one package, core_id restarts per cluster.
    lines = ["0,0,0,0", "1,1,0,0", "2,0,0,0", "3,1,0,0"]
    lines += [f"/sys/devices/system/cpu/cpu{n}/topology/core_cpus_list:{n}" for n in range(4)]
    lines += [f"/sys/devices/system/cpu/cpu{n}/topology/package_cpus_list:0-3" for n in range(4)]
    rows = parse_sysfs_cpu("\n".join(lines) + "\n").rows
    assert [(r.cpu, r.core, r.socket) for r in rows] == [(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 0)]


@pytest.mark.parametrize(
    "extra, message",
    [
        ("/sys/devices/system/cpu/cpu0/topology/core_cpus_list:0-999999\n", "over 65536"),
        ("/sys/devices/system/cpu/cpu0/topology/core_cpus_list:x\n", "bad CPU list"),
        ("/sys/devices/system/cpu/cpu0/topology/core_cpus_list:1\n", "missing from its own"),
        ("/sys/devices/system/cpu/cpu0/topology/core_cpus_list:0-1\n", "not a partition"),
    ],
)
def test_bad_sibling_lists(extra, message):
    base = "0,0,0,0\n1,1,0,0\n"
    lists = "".join(
        f"/sys/devices/system/cpu/cpu{n}/topology/{name}:{value}\n"
        for n in (0, 1)
        for name, value in (("core_cpus_list", n), ("package_cpus_list", "0-1"))
        if not (n == 0 and name == "core_cpus_list")
    )
    with pytest.raises(ParseError, match=message):
        parse_sysfs_cpu(base + extra + lists)


def test_missing_list_for_a_cpu():
    with pytest.raises(ParseError, match="CPU 0 has no package_cpus_list"):
        parse_sysfs_cpu("0,0,0,0\n1,1,0,0\n/sys/devices/system/cpu/cpu0/topology/core_cpus_list:0\n")
