"""Fact commands run by a real local sh, and their parsers on real and hostile output."""

import getpass
import hashlib
import os
import subprocess

import pytest

from provision.errors import ParseError
from provision.operations.base import StateKey
from provision.operations.state import parse_state, state_command


def read(key):
    out = subprocess.run(["sh", "-c", state_command(key)], capture_output=True, text=True, check=True).stdout
    return parse_state(key, out)


def test_file_fact_from_real_stat(tmp_path):
    path = tmp_path / "a file"
    path.write_bytes(b"hello\n\x00binary")
    os.chmod(path, 0o640)
    state = read(StateKey("file", str(path)))
    assert state.kind == "f" and state.mode == 0o640 and state.content == b"hello\n\x00binary"
    assert state.sha256 == hashlib.sha256(b"hello\n\x00binary").hexdigest()
    assert state.owner == getpass.getuser()


def test_folders_are_walked_as_resolved_too_when_a_link_is_on_the_way(tmp_path):
    # issue 28: where the folder as written is the folder as resolved, one walk of its parents;
    # a link on the way still has the resolved folders checked: here the literal parents are safe
    # (the link resolves to a root-owned 0755 folder) but one resolved parent is world-writable
    writable = tmp_path / "shared"
    (writable / "sub").mkdir(parents=True)
    os.chmod(writable, 0o777)  # no sticky bit: another user may rename what is inside
    (writable / "sub" / "f").write_text("x\n")
    os.chmod(tmp_path, 0o755)
    (tmp_path / "link").symlink_to(writable / "sub")
    state = read(StateKey("file", str(tmp_path / "link" / "f")))
    assert (state.kind, state.mode, state.below) == ("u", 0o777, str(writable)), state
    plain = read(StateKey("file", str(writable / "sub" / "f")))  # no link: one walk, same finding
    assert (plain.kind, plain.below) == ("u", str(writable)), plain
    os.chmod(writable, 0o755)
    assert read(StateKey("file", str(tmp_path / "link" / "f"))).content == b"x\n"


def test_empty_file_and_folder_and_absent(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert read(StateKey("file", str(tmp_path / "empty"))).content == b""
    assert read(StateKey("file", str(tmp_path))).kind == "d"
    assert read(StateKey("file", str(tmp_path / "nope"))) is None


def test_path_with_quotes_is_quoted(tmp_path):
    path = tmp_path / "it's $(touch pwned)"
    path.write_text("x")
    assert read(StateKey("file", str(path))).content == b"x"
    assert not (tmp_path / "pwned").exists()


def test_home_path_of_missing_user_is_absent():
    assert read(StateKey("file", "~nosuchuser9/.ssh/authorized_keys")) is None


def test_user_group_and_ids():
    assert read(StateKey("user", "root")).uid == 0
    assert read(StateKey("group", "root")).gid == 0
    assert read(StateKey("uid", "0")) == "root"
    assert read(StateKey("user", "nosuchuser9")) is None
    assert read(StateKey("gid", "987654")) is None


def test_command_exit_code():
    assert read(StateKey("command", "test -d /")) == 0
    assert read(StateKey("command", "false")) == 1


def test_hostinfo_local():
    info = read(StateKey("hostinfo"))
    assert info["hostname"] and info["short"] == info["hostname"].split(".")[0]


@pytest.mark.parametrize(
    "key,text",
    [
        (StateKey("file", "/x"), "regular file|9999|root|root|1\n"),
        (StateKey("file", "/x"), "regular file|644|root|root|3\n=!!notbase64\n"),
        (StateKey("file", "/x"), "sticky|1777|root|root|0\n/tmp\nmaybe\nregular file|644|root|root|3\n"),
        (StateKey("exists", "/x"), "yes\n"),
        (StateKey("user", "a"), "a:x:notanumber:1::/h:/bin/sh\n"),
        (StateKey("group", "a"), "a:x\n"),
        (StateKey("command", "true"), "garbage\n"),
    ],
)
def test_hostile_output_rejected(key, text):
    with pytest.raises(ParseError):
        parse_state(key, text)


def test_packages_and_services_parse():
    assert parse_state(StateKey("package", "rsync"), "ii |3.2.7-1") == "3.2.7-1"
    assert parse_state(StateKey("package", "rsync"), "un |") is None
    assert parse_state(StateKey("package", "rsync"), "") is None
    state = parse_state(StateKey("service", "ssh"), "active\nenabled\n")
    assert (state.active, state.enabled) == ("active", "enabled")


def test_hostinfo_bounds_and_filters():
    text = "h node1.cluster\nf node1.cluster\na 10.0.0.1\na $(evil)\nk ssh-ed25519 AAAA root@node1\n" + "a 1.1.1.1\n" * 500
    info = parse_state(StateKey("hostinfo"), text)
    assert info["short"] == "node1" and info["host_keys"] == ["ssh-ed25519 AAAA"]
    assert "$(evil)" not in info["addresses"] and len(info["addresses"]) < 200


def test_stat_fact_reads_metadata_never_content(tmp_path):
    path = tmp_path / "id_ed25519"
    path.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    os.chmod(path, 0o600)
    key = StateKey("stat", str(path))
    command = state_command(key)
    assert "base64" not in command and "cat" not in command and "sha256sum" not in command and "<" not in command
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
    assert "secret" not in out and "BEGIN" not in out
    state = parse_state(key, out)
    assert state.kind == "f" and state.mode == 0o600 and state.owner == getpass.getuser()
    assert state.sha256 is None and state.content is None
    assert read(StateKey("stat", str(tmp_path))).kind == "d"
    assert read(StateKey("stat", str(tmp_path / "nope"))) is None
    assert read(StateKey("stat", "~nosuchuser9/.ssh/id_ed25519")) is None
    with pytest.raises(ParseError):
        parse_state(key, "regular file|abc|root|root|1\n")


# -- paths a user controls: never followed, never read through (issue 14) ----------------------


def test_final_symlink_is_reported_never_followed(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$hash\n")
    link = tmp_path / "authorized_keys"
    link.symlink_to(secret)
    for kind in ("file", "stat"):
        out = subprocess.run(["sh", "-c", state_command(StateKey(kind, str(link)))], capture_output=True, text=True).stdout
        assert "hash" not in out and "cm9vd" not in out  # neither the text nor its base64
        state = parse_state(StateKey(kind, str(link)), out)
        assert state.kind == "l" and state.content is None and state.sha256 is None
    (tmp_path / "dangling").symlink_to(tmp_path / "nothing")
    assert read(StateKey("file", str(tmp_path / "dangling"))).kind == "l"  # a dangling link is not "absent"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files to another user")
def test_foreign_hard_link_and_folder_another_user_can_write(tmp_path):
    target = tmp_path / "theirs"
    target.write_text("not yours\n")
    os.chown(target, 65534, 65534)
    os.link(target, tmp_path / "planted")
    state = read(StateKey("file", str(tmp_path / "planted")))
    assert state.kind == "h" and state.content is None
    os.chown(target, 0, 0)  # root's own file with two names is root's business
    assert read(StateKey("file", str(tmp_path / "planted"))).kind == "f"

    theirs = tmp_path / "home"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    state = read(StateKey("file", str(theirs / ".ssh" / "authorized_keys")))
    assert state.kind == "u" and state.below == str(theirs) and state.owner == "nobody"
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # other-writable without the sticky bit
    assert read(StateKey("stat", str(shared / "x"))).kind == "u"
    os.chmod(shared, 0o1777)  # sticky, like /tmp: others may add names, never replace root's (issue 33)
    state = read(StateKey("stat", str(shared / "x")))
    assert (state.kind, state.below, state.mode, state.entry, state.mine) == ("s", str(shared), 0o1777, None, True)
    (shared / "x").write_text("root's\n")  # root's own name there: its content is read
    state = read(StateKey("file", str(shared / "x")))
    assert state.kind == "s" and state.mine and state.entry.content == b"root's\n"
    os.chown(shared / "x", 65534, 65534)  # another user's name there: never read, never root's to act on
    state = read(StateKey("file", str(shared / "x")))
    assert state.kind == "s" and not state.mine and state.entry.owner == "nobody" and state.entry.content is None
    (tmp_path / "via").symlink_to(theirs)  # a folder reached through a link is checked where it really is
    assert read(StateKey("file", str(tmp_path / "via" / "f"))).kind == "u"


def test_refused_kinds_parse():
    assert parse_state(StateKey("file", "/x"), "symbolic link|777|alice|alice|11\n").kind == "l"
    assert parse_state(StateKey("file", "/x"), "hard link|640|root|shadow|900\n").kind == "h"
    state = parse_state(StateKey("stat", "/d/x"), "below|755|alice|alice|0\n/d\n")
    assert (state.kind, state.below, state.owner, state.mode) == ("u", "/d", "alice", 0o755)


def test_hostinfo_drops_names_and_keys_a_node_cannot_have():
    # A node's hostname and host keys go into every node's known_hosts and the pairwise ssh
    # commands: a name with shell or known_hosts syntax ("*" matches every host) or a key line
    # that is no key is dropped here, so it cannot fail the known_hosts task on every node.
    text = "h *\nf w1,evil;rm -rf /\na 10.0.0.2\nk ssh-ed25519 AAAAC3Nz\nk @cert-authority *\nk ssh-rsa not$base64\n"
    info = parse_state(StateKey("hostinfo"), text)
    assert (info["hostname"], info["fqdn"], info["short"]) == ("", "", "")
    assert info["host_keys"] == ["ssh-ed25519 AAAAC3Nz"] and info["addresses"] == ["10.0.0.2"]
    good = parse_state(StateKey("hostinfo"), "h w1.cluster.example\nf w1.cluster.example\n")
    assert (good["hostname"], good["short"]) == ("w1.cluster.example", "w1")


def test_non_ascii_file_content_is_a_parse_error_not_a_traceback():
    """Found by tests/test_state_parsers_property.py: b64decode refuses non-ASCII text with a plain
    ValueError, not binascii.Error."""
    with pytest.raises(ParseError, match="not base64"):
        parse_state(StateKey("file", "/etc/x"), "regular file|0|||\r=\x80")
