"""The os, pkgindex and candidate fact kinds: parsers accept what the commands print (real
os-release files of the families provision knows) and refuse anything else; the commands run
here, on this machine's real apt, parse."""

import subprocess

import pytest

from provision.errors import ParseError
from provision.operations.base import StateKey
from provision.operations.os_state import OsRelease, PackageIndex, os_family
from provision.operations.state import parse_state, state_command

DEBIAN_12 = """PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
"""
UBUNTU_2404 = """PRETTY_NAME="Ubuntu 24.04.1 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.1 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
UBUNTU_CODENAME=noble
"""
ROCKY_9 = """NAME="Rocky Linux"
VERSION="9.4 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.4"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Rocky Linux 9.4 (Blue Onyx)"
ANSI_COLOR="0;32"
# a comment
CPE_NAME="cpe:/o:rocky:rocky:9::baseos"
"""
RHEL_8 = "NAME='Red Hat Enterprise Linux'\nID='rhel'\nID_LIKE='fedora'\nVERSION_ID='8.10'\n"
OS_CASES = [
    ("debian12", DEBIAN_12, OsRelease("debian", (), "12"), "debian"),
    ("ubuntu2404", UBUNTU_2404, OsRelease("ubuntu", ("debian",), "24.04"), "debian"),
    ("rocky9", ROCKY_9, OsRelease("rocky", ("rhel", "centos", "fedora"), "9.4"), "rhel"),
    ("rhel8-single-quotes", RHEL_8, OsRelease("rhel", ("fedora",), "8.10"), "rhel"),
    ("missing", "", OsRelease("", (), ""), "unknown"),
    ("suse", 'ID="opensuse-leap"\nID_LIKE="suse opensuse"\n', OsRelease("opensuse-leap", ("suse", "opensuse"), ""), "unknown"),
]


@pytest.mark.parametrize("name,text,release,family", OS_CASES, ids=[c[0] for c in OS_CASES])
def test_os_release(name, text, release, family):
    parsed = parse_state(StateKey("os"), text)
    assert parsed == release and os_family(parsed) == family


@pytest.mark.parametrize(
    "text",
    [
        "ID=debian\nthis is not a key\n",
        'ID="debian\n',  # unbalanced
        "ID=de bian\n",  # unquoted space
        'ID="Debian; reboot"\n',  # not an os-release word
        'ID=debian\nID_LIKE="rhel $(x)"\n',
        'ID=debian\nVERSION_ID="12\\n; x"\n',
        "id=debian\n",  # keys are upper case
    ],
)
def test_os_release_refuses_malformed(text):
    with pytest.raises(ParseError):
        parse_state(StateKey("os"), text)


INDEX_CASES = [
    ("apt 3600\n", PackageIndex("apt", 3600)),
    ("apt none\n", PackageIndex("apt", None)),
    ("dnf 12\n", PackageIndex("dnf", 12)),
    ("yum none\n", PackageIndex("yum", None)),
    ("apt -5\n", PackageIndex("apt", -5)),
    ("none\n", PackageIndex("", None)),
]


@pytest.mark.parametrize("text,expected", INDEX_CASES)
def test_pkgindex(text, expected):
    assert parse_state(StateKey("pkgindex"), text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("installed\n", "installed"),
        ("unknown\n", "unknown"),
        ("c \n", None),
        ("c (none)\n", None),
        ("c 1:2.6.2-4+deb12u1\n", "1:2.6.2-4+deb12u1"),
    ],
)
def test_candidate(text, expected):
    assert parse_state(StateKey("candidate", "nfs-common"), text) == expected


@pytest.mark.parametrize(
    "kind,text",
    [("pkgindex", "apt soon\n"), ("pkgindex", "pacman 3\n"), ("candidate", "c 1.0; rm -rf /\n"), ("candidate", "maybe\n")],
)
def test_index_and_candidate_refuse_other_output(kind, text):
    with pytest.raises(ParseError):
        parse_state(StateKey(kind, "nfs-common" if kind == "candidate" else ""), text)


def test_candidate_command_checks_the_name():
    with pytest.raises(ValueError):
        state_command(StateKey("candidate", "x; reboot"))


@pytest.mark.parametrize(
    "key", [StateKey("os"), StateKey("pkgindex"), StateKey("candidate", "dpkg"), StateKey("candidate", "no-such-package-x")]
)
def test_commands_run_here_and_parse(key):
    done = subprocess.run(["sh", "-c", state_command(key)], capture_output=True, text=True, timeout=60)
    value = parse_state(key, done.stdout)
    if key.kind == "os":
        assert isinstance(value, OsRelease)
    elif key.kind == "pkgindex":
        assert isinstance(value, PackageIndex)
    elif key.arg == "dpkg":
        assert value in ("installed", "unknown")  # dpkg itself on any Debian; rpm hosts say unknown
    else:
        assert value in (None, "unknown")
