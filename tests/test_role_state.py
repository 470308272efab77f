"""Fact kinds of the roles: commands quote their argument, parsers accept what the commands print
and refuse anything else (node output is hostile)."""

import pytest

from provision.errors import ParseError
from provision.operations.base import StateKey
from provision.operations.state import parse_state, state_command

# /proc/net/tcp and tcp6 as Linux prints them (wide lines)
TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  2001        0 2 1 0 100 0 0 10 0
   2: 0100007F:22B8 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  2001        0 3 1 0 100 0 0 10 0
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:22B9 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  2002        0 4 1 0 100 0 0 10 0
"""  # noqa: E501

CASES = [
    ("mount", "/data/x", "s1:/data/x nfs4\n", ("s1:/data/x", "nfs4")),
    ("mount", "/data/x", "", None),
    ("nfsd", "", "kernel\n", "kernel"),
    ("nfsd", "", "none\n", "none"),
    ("nfsmount", "", "cap 000001ffffffffff\n", ()),
    (
        "nfsmount",
        "",
        "no kernel NFS client\nno mount.nfs (nfs-common)\ncap 00000000a80425fb\n",
        ("no kernel NFS client", "no mount.nfs (nfs-common)", "no privilege to mount (CAP_SYS_ADMIN)"),
    ),
    ("listening", "", TCP, {22: 0, 8888: 2001, 8889: 2002}),
    ("df", "/opt/anaconda3", "/dev/sda1 1000 400 600 40% /\n", 600),
    ("pidfile", "/run/x.pid", "alive\n", "alive"),
]


@pytest.mark.parametrize("kind,arg,text,expected", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_parsers(kind, arg, text, expected):
    assert parse_state(StateKey(kind, arg), text) == expected


BAD = [
    ("mount", "/data/x", "one two three\n"),
    ("nfsd", "", "maybe\n"),
    ("nfsmount", "", "cap zz\n"),
    ("nfsmount", "", "rm -rf /\n"),
    ("listening", "", "   0: 00000000:XYZW 00000000:0000 0A 0 0 0 x 0 1\n"),
    ("df", "/opt", "garbage\n"),
    ("pidfile", "/run/x.pid", "\n"),
]


@pytest.mark.parametrize("kind,arg,text", BAD, ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD)])
def test_hostile_output_is_refused(kind, arg, text):
    with pytest.raises(ParseError):
        parse_state(StateKey(kind, arg), text)


def test_commands_quote_paths():
    assert "'/data/a b'" in state_command(StateKey("mount", "/data/a b"))
    assert "'/opt/x;rm'" in state_command(StateKey("df", "/opt/x;rm"))
    assert "H_616c696365" in state_command(StateKey("pidfile", "~alice/x.pid"))
