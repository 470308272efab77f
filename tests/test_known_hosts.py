"""known_hosts files as OpenSSH reads them: file lists from ssh_config, patterns, hashes, markers."""

import base64
import hashlib
import hmac
import io
import shutil
import subprocess
import sys
from pathlib import Path

import paramiko
import pytest
from test_hostkeys import new_key

from provision.transport.known_hosts import (
    KnownHostsFiles,
    entries_for,
    glob_matches,
    hash_name,
    host_matches,
    hostkey_name,
    known_hosts_files,
    parse_line,
)


def lookup(text: str, host: str):
    config = paramiko.SSHConfig()
    config.parse(io.StringIO(text))
    return config.lookup(host)


def test_defaults_are_openssh_defaults():
    files = known_hosts_files({})
    home = Path("~").expanduser()
    assert files.user == (home / ".ssh/known_hosts", home / ".ssh/known_hosts2")
    assert files.global_ == (Path("/etc/ssh/ssh_known_hosts"), Path("/etc/ssh/ssh_known_hosts2"))
    assert not files.hash_new


def test_files_from_ssh_config_per_host():
    text = (
        'Host node*\n  UserKnownHostsFile ~/kh "/tmp/with space" %d/kh3\n  GlobalKnownHostsFile /site/known_hosts\n'
        "  HashKnownHosts yes\nHost other\n  UserKnownHostsFile none\n"
    )
    home = Path("~").expanduser()
    files = known_hosts_files(lookup(text, "node7"))
    assert files.user == (home / "kh", Path("/tmp/with space"), home / "kh3")
    assert files.global_ == (Path("/site/known_hosts"),) and files.hash_new
    assert known_hosts_files(lookup(text, "other")).user == ()
    # --known-hosts replaces the user files; the site's global file still applies.
    overridden = known_hosts_files(lookup(text, "node7"), Path("/x/kh"))
    assert overridden.user == (Path("/x/kh"),) and overridden.global_ == (Path("/site/known_hosts"),)


def test_hostkey_name():
    assert hostkey_name("Node1", 22) == "node1"
    assert hostkey_name("10.0.0.1", 2222) == "[10.0.0.1]:2222"


@pytest.mark.parametrize(
    "field, name, expected",
    [
        ("node1,node2", "node2", True),
        ("NODE1", "node1", True),
        ("node*", "node17", True),
        ("node?", "node17", False),
        ("node*,!node3", "node3", False),
        ("!node3,node*", "node3", False),
        ("node1", "node10", False),
        ("[10.0.0.1]:2222", "[10.0.0.1]:2222", True),
        ("[10.0.0.1]:2222", "10.0.0.1", False),  # a port entry is not the port-22 entry
        ("10.0.0.1", "[10.0.0.1]:2222", False),
        ("[10.0.0.*]:2222", "[10.0.0.9]:2222", True),  # brackets are literal, not a class
        ("[ab]", "a", False),
    ],
)
def test_host_patterns(field, name, expected):
    assert host_matches(field, name) is expected


def test_glob_is_the_regex_it_replaced_on_every_small_case():
    """Every pattern and name over a small alphabet (with * and ? as literal name characters too):
    the same answer as the one-``.*``-per-star regex the walk used before."""
    import itertools
    import re

    def by_regex(pattern: str, name: str) -> bool:
        body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
        return re.fullmatch(body, name, re.DOTALL) is not None

    patterns = ["".join(p) for size in range(5) for p in itertools.product("ab*?", repeat=size)]
    names = ["".join(n) for size in range(5) for n in itertools.product("ab*", repeat=size)]
    for pattern, name in itertools.product(patterns, names):
        assert glob_matches(pattern, name) is by_regex(pattern, name), (pattern, name)


def test_a_pattern_of_many_stars_against_a_long_name_finishes():
    """known_hosts is text anyone with the file (or --known-hosts) wrote: ``*a*a*a*a*a*a*a*b``
    against a 253-character name backtracked for hours as a regex. A child process with a generous
    bound, as tests/test_regexes.py does: a guard against catastrophic backtracking, not a speed test."""
    code = (
        "from provision.transport.known_hosts import host_matches\n"
        "print(host_matches('*a' * 7 + '*b,node1', 'a' * 253), host_matches('*a' * 7 + '*b', 'a' * 252 + 'b'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "True"], done.stderr


def openssh_hash(name: str, salt: bytes) -> str:
    """The hashed-name format computed here independently: |1|base64(salt)|base64(HMAC-SHA1(salt, name))."""
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def hashed_file(tmp_path, plain_lines: str) -> Path:
    """A known_hosts file hashed by the real `ssh-keygen -H` (else hashed by hand, as OpenSSH does)."""
    path = tmp_path / "known_hosts"
    path.write_text(plain_lines)
    if shutil.which("ssh-keygen"):
        subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
    else:
        lines = []
        for line in plain_lines.splitlines():
            name, rest = line.split(" ", 1)
            lines.append(f"{openssh_hash(name, bytes(range(20)))} {rest}\n")
        path.write_text("".join(lines))
    assert "|1|" in path.read_text() and "node1" not in path.read_text()
    return path


def test_hashed_entries_and_port_entries(tmp_path):
    key1, key2 = new_key(), new_key()
    path = hashed_file(tmp_path, f"node1 ssh-ed25519 {key1.get_base64()}\n[10.0.0.5]:2222 ssh-ed25519 {key2.get_base64()}\n")
    files = KnownHostsFiles((path,), ())
    assert [e.blob for e in entries_for("node1", files)] == [key1.asbytes()]
    assert [e.blob for e in entries_for("[10.0.0.5]:2222", files)] == [key2.asbytes()]
    assert entries_for("10.0.0.5", files) == [] and entries_for("node2", files) == []


def test_our_hash_matches_openssh_format():
    salt = bytes(range(20))
    assert hash_name("[10.0.0.5]:2222", salt) == openssh_hash("[10.0.0.5]:2222", salt)
    assert host_matches(hash_name("node1"), "node1") and not host_matches(hash_name("node1"), "node2")


def test_markers_and_malformed_lines(tmp_path):
    key = new_key()
    b64 = key.get_base64()
    path = tmp_path / "kh"
    path.write_text(
        f"# comment\n\n@revoked node1 ssh-ed25519 {b64}\n@cert-authority *.site ssh-ed25519 {b64}\n"
        f"@bogus node1 ssh-ed25519 {b64}\nnode1 ssh-ed25519 !!notbase64\nnode1 ssh-ed25519\n"
        f"node1 ssh-ed25519 {b64} comment here"  # no trailing newline
    )
    found = entries_for("node1", KnownHostsFiles((path,), ()))
    assert [(e.marker, e.line) for e in found] == [("@revoked", 3), (None, 8)]
    assert entries_for("n1.site", KnownHostsFiles((path,), ()))[0].marker == "@cert-authority"
    assert parse_line("@revoked", path, 1) is None


def test_file_reread_after_change_and_missing_files(tmp_path):
    path = tmp_path / "kh"
    files = KnownHostsFiles((tmp_path / "missing", path), (tmp_path / "dir",))
    (tmp_path / "dir").mkdir()
    assert entries_for("node1", files) == []
    path.write_text(f"node1 ssh-ed25519 {new_key().get_base64()}\n")
    assert len(entries_for("node1", files)) == 1
    with path.open("a") as handle:
        handle.write(f"node1 ecdsa-sha2-nistp256 {paramiko.ECDSAKey.generate().get_base64()}\n")
    assert [e.key_type for e in entries_for("node1", files)] == ["ssh-ed25519", "ecdsa-sha2-nistp256"]


def test_a_file_that_grows_is_read_again_from_where_it_was(tmp_path, monkeypatch):
    """Issue 37: --accept-new-host-keys appends a line per new host, and each next host's lookup
    read the file again: the whole file was parsed each time (O(hosts²) lines for a first probe of
    4096 hosts). Only the appended lines are parsed now, with the same entries and line numbers as
    a fresh read of the whole file, the unfinished last line included."""
    import provision.transport.known_hosts as known_hosts

    parsed = []
    monkeypatch.setattr(known_hosts, "parse_line", lambda text, path, n: parsed.append(n) or parse_line(text, path, n))
    path = tmp_path / "known_hosts"
    files = KnownHostsFiles((path,), ())
    keys = [new_key().get_base64() for _ in range(3)]
    for index in range(300):
        with path.open("a") as handle:
            handle.write(f"# node {index}\n[10.0.{index // 250}.{index % 250}]:22 ssh-ed25519 {keys[index % 3]}\n")
        assert len(entries_for(f"[10.0.{index // 250}.{index % 250}]:22", files)) == 1
    assert len(parsed) == 600  # each line once (a whole read per lookup: 90300)
    with path.open("a") as handle:
        handle.write(f"node1,node2 ssh-ed25519 {keys[0]}")  # no newline yet: read, and read again once finished
    assert [e.line for e in entries_for("node2", files)] == [601]
    with path.open("a") as handle:
        handle.write(f" comment\n|1|{'A' * 28}|{'B' * 28} ssh-ed25519 {keys[1]}\nnode* ssh-ed25519 {keys[2]}\n")
    grown = {name: entries_for(name, files) for name in ("node1", "node2", "nodeX", "[10.0.1.49]:22", "[10.0.0.0]:22")}
    assert len(parsed) == 604
    known_hosts._cache.clear()  # a fresh read of the whole file finds the same entries
    assert {name: entries_for(name, files) for name in grown} == grown
    assert [e.line for e in grown["node1"]] == [601, 603] and [e.line for e in grown["[10.0.1.49]:22"]] == [600]
    path.write_text(f"node1 ssh-ed25519 {keys[2]}\n")  # rewritten in place, other lines: read whole
    assert [(e.line, e.blob) for e in entries_for("node1", files)] == [(1, base64.b64decode(keys[2]))]
