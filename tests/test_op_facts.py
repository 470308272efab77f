"""Fact commands run by a real local sh, and their parsers on real and hostile output."""

import getpass
import hashlib
import os
import subprocess

import pytest

from provision.errors import ParseError
from provision.operations.base import FactKey
from provision.operations.facts import fact_command, parse_fact


def read(key):
    out = subprocess.run(["sh", "-c", fact_command(key)], capture_output=True, text=True, check=True).stdout
    return parse_fact(key, out)


def test_file_fact_from_real_stat(tmp_path):
    path = tmp_path / "a file"
    path.write_bytes(b"hello\n\x00binary")
    os.chmod(path, 0o640)
    state = read(FactKey("file", str(path)))
    assert state.kind == "f" and state.mode == 0o640 and state.content == b"hello\n\x00binary"
    assert state.sha256 == hashlib.sha256(b"hello\n\x00binary").hexdigest()
    assert state.owner == getpass.getuser()


def test_empty_file_and_folder_and_absent(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert read(FactKey("file", str(tmp_path / "empty"))).content == b""
    assert read(FactKey("file", str(tmp_path))).kind == "d"
    assert read(FactKey("file", str(tmp_path / "nope"))) is None


def test_path_with_quotes_is_quoted(tmp_path):
    path = tmp_path / "it's $(touch pwned)"
    path.write_text("x")
    assert read(FactKey("file", str(path))).content == b"x"
    assert not (tmp_path / "pwned").exists()


def test_home_path_of_missing_user_is_absent():
    assert read(FactKey("file", "~nosuchuser9/.ssh/authorized_keys")) is None


def test_user_group_and_ids():
    assert read(FactKey("user", "root")).uid == 0
    assert read(FactKey("group", "root")).gid == 0
    assert read(FactKey("uid", "0")) == "root"
    assert read(FactKey("user", "nosuchuser9")) is None
    assert read(FactKey("gid", "987654")) is None


def test_command_exit_code():
    assert read(FactKey("command", "test -d /")) == 0
    assert read(FactKey("command", "false")) == 1


def test_hostinfo_local():
    info = read(FactKey("hostinfo"))
    assert info["hostname"] and info["short"] == info["hostname"].split(".")[0]


@pytest.mark.parametrize(
    "key,text",
    [
        (FactKey("file", "/x"), "regular file|9999|root|root|1\n"),
        (FactKey("file", "/x"), "regular file|644|root|root|3\n" + "0" * 64 + "\n!!notbase64\n"),
        (FactKey("user", "a"), "a:x:notanumber:1::/h:/bin/sh\n"),
        (FactKey("group", "a"), "a:x\n"),
        (FactKey("command", "true"), "garbage\n"),
    ],
)
def test_hostile_output_rejected(key, text):
    with pytest.raises(ParseError):
        parse_fact(key, text)


def test_packages_and_services_parse():
    assert parse_fact(FactKey("package", "rsync"), "ii |3.2.7-1") == "3.2.7-1"
    assert parse_fact(FactKey("package", "rsync"), "un |") is None
    assert parse_fact(FactKey("package", "rsync"), "") is None
    state = parse_fact(FactKey("service", "ssh"), "active\nenabled\n")
    assert (state.active, state.enabled) == ("active", "enabled")


def test_hostinfo_bounds_and_filters():
    text = "h node1.cluster\nf node1.cluster\na 10.0.0.1\na $(evil)\nk ssh-ed25519 AAAA root@node1\n" + "a 1.1.1.1\n" * 500
    info = parse_fact(FactKey("hostinfo"), text)
    assert info["short"] == "node1" and info["host_keys"] == ["ssh-ed25519 AAAA"]
    assert "$(evil)" not in info["addresses"] and len(info["addresses"]) < 200


def test_stat_fact_reads_metadata_never_content(tmp_path):
    path = tmp_path / "id_ed25519"
    path.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    os.chmod(path, 0o600)
    key = FactKey("stat", str(path))
    command = fact_command(key)
    assert "base64" not in command and "cat" not in command and "sha256sum" not in command and "<" not in command
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
    assert "secret" not in out and "BEGIN" not in out
    state = parse_fact(key, out)
    assert state.kind == "f" and state.mode == 0o600 and state.owner == getpass.getuser()
    assert state.sha256 is None and state.content is None
    assert read(FactKey("stat", str(tmp_path))).kind == "d"
    assert read(FactKey("stat", str(tmp_path / "nope"))) is None
    assert read(FactKey("stat", "~nosuchuser9/.ssh/id_ed25519")) is None
    with pytest.raises(ParseError):
        parse_fact(key, "regular file|abc|root|root|1\n")
