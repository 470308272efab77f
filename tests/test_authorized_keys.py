"""A person's own public keys (provision/operations/authorized_keys.py): each line checked as sshd
reads it, cited from openssh-portable 0ef0f5a839831c213f24e3f2ae434765c607fb50, and managed in her
authorized_keys beside the lines she wrote herself. Real keys made with ssh-keygen (OpenSSH 9.2)."""

import pytest

from provision.errors import ArgumentError
from provision.operations import OPERATIONS
from provision.operations.authorized_keys import OWN_MARK, keys_of, parse_key_line, read_keys_file, set_own_keys
from provision.operations.base import FileState, StateKey, UserEntry

ED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG/NlvIKQNr3sggO6IIoODclluzKg8tcqNvL1wdoaXn7 alice@laptop"
ECDSA = (
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBK+r3Ya6OsEndk5j2pMav07tcB1c"
    "xgpCtFxqDNVzXib5ouQxJEHSn/RnF1hbfjd7nvVcZlW7RJHrxzdsbLBbeVA= alice@phone"
)
RSA = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCjM5GuUZhvoCwYvVhknPbunTZtMjHu2kkggRoQfEFaZSukzgBnTPXh4oOnPP6I"
    "Z43TkqXxEBPaSfsYTa3hr7+5PUjJNAIAj+mMxzId7HoF361DehqA7ywuPMlU1I9h+iUBHA4rJg2xRt9mqwyVOShcA6Oe966ct8cV"
    "WickgI5l+WcPAP7/JADUusCjm3OmmRa2/++mx4+1ojMcNglkHC2BscZ3HxKAajDgVmMcRzQDB/RTVrArnQ36gO2ZonnZPn1ro+zv"
    "c4MzAxrcLVBrk16XbrucBEr+nCDhpLBj47coaQhyiB7yizQIg9n3tuWrV8TZPjeDOwz8aOJjf0y4TNUP alice@desk"
)


@pytest.mark.parametrize(
    "line,options",
    [
        (ED, ""),
        (ECDSA, ""),
        (RSA, ""),
        ('from="10.0.0.0/8,!10.0.0.9",no-pty ' + ED, 'from="10.0.0.0/8,!10.0.0.9",no-pty'),
        ('restrict,command="echo \\"hi there\\"" ' + ED, 'restrict,command="echo \\"hi there\\""'),
        ("NO-PORT-FORWARDING " + ED, "NO-PORT-FORWARDING"),  # misc.c opt_flag: strncasecmp
        ('expiry-time="20300101",environment="A=b" ' + ED, 'expiry-time="20300101",environment="A=b"'),
    ],
)
def test_lines_sshd_reads_are_taken_as_written(line, options):
    key = parse_key_line(line)
    assert key.options == options and key.type in ("ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa")
    assert key.line() == line.strip()


@pytest.mark.parametrize(
    "line,why",
    [
        # auth-options.c sshauthopt_parse: "Anything other than a comma is an unknown option"
        ("forward-agent " + ED, "unknown key option 'forward-agent'"),
        # misc.c opt_dequote: `if (*s != '"') { *errstrp = "missing start quote";`
        ("from=10.0.0.1 " + ED, "must be in double quotes"),
        # authfile.c sshkey_advance_past_options: "return failure for unterminated quotes"
        ('command="echo ' + ED, "unterminated quote"),
        ("no-pty, " + ED, "end with a comma"),
        # sshkey.c sshkey_read: "ensure type of blob matches type at start of line"
        ("ssh-rsa " + ED.split()[1], "is a 'ssh-ed25519' key, not ssh-rsa"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG/NlvIKQNr3sgg!O6IIoODc", "unknown key option"),
        ("ssh-ed25519 QUJD", "too short"),
        (ED + "\nssh-rsa AAAA", "control characters"),
        ("", "empty"),
    ],
)
def test_lines_sshd_would_skip_are_refused_naming_why(line, why):
    with pytest.raises(ArgumentError, match="not a public key line") as caught:
        parse_key_line(line)
    assert why in str(caught.value), caught.value


def test_keys_of_names_the_entry_and_the_file_names_its_line(tmp_path):
    with pytest.raises(ArgumentError, match=r"^ssh_keys\[1\]: not a public key line"):
        keys_of([ED, "nope nope"], "ssh_keys")
    keys = tmp_path / "alice.pub"
    keys.write_text(f"# her laptop\n{ED}\n\n{ECDSA}\nssh-ed25519 x\n")
    with pytest.raises(ArgumentError, match=rf"^{keys}:5: not a public key line"):
        read_keys_file(keys)
    keys.write_text(f"# her laptop\n{ED}\n\n{ECDSA}\n")
    assert [k.comment for k in read_keys_file(keys)] == ["alice@laptop", "alice@phone"]
    (tmp_path / "link.pub").symlink_to(keys)
    with pytest.raises(ArgumentError, match="link"):
        read_keys_file(tmp_path / "link.pub")


def test_her_own_lines_are_kept_ours_made_exactly_the_inventory_s():
    hers = "# my note\n" + RSA + "\n"
    first = set_own_keys(hers, [parse_key_line(ED), parse_key_line('from="10.0.0.0/8" ' + ECDSA)])
    assert first == hers + f"{ED} {OWN_MARK}\n" + f'from="10.0.0.0/8" {ECDSA} {OWN_MARK}\n'
    assert set_own_keys(first, [parse_key_line(ED), parse_key_line('from="10.0.0.0/8" ' + ECDSA)]) == first  # converged
    # the phone key leaves the inventory: its line leaves the file; hers and the laptop stay
    assert set_own_keys(first, [parse_key_line(ED)]) == hers + f"{ED} {OWN_MARK}\n"
    # a key she already wrote herself (with her own options) is never added a second time
    own = "no-pty " + ED + "\n"
    assert set_own_keys(own, [parse_key_line(ED)]) == own
    assert set_own_keys(first, []) == hers  # every own key removed from the inventory


ALICE = UserEntry("alice", 2001, 2001, "/home/alice", "/bin/bash")
AUTH = StateKey("file", "~alice/.ssh/authorized_keys")


def test_the_operation_writes_node_keys_and_hers_once_and_converges():
    import hashlib

    operation = OPERATIONS["authorized_key"]
    node = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHc0Hf9YtWXxg0kd0Q8H2yAJ3Pj4AB alice@node1"
    args = operation.check_args({"user": "alice", "node_keys": {"n1": [node]}, "own_keys": [ED]})
    [write] = operation.plan(args, {StateKey("user", "alice"): ALICE, AUTH: None})
    assert write.content.decode() == f"{ED} {OWN_MARK}\n{node} provision-node=n1\n" and write.mode == 0o600
    state = FileState("f", 0o600, "alice", "alice", hashlib.sha256(write.content).hexdigest(), write.content)
    assert operation.plan(args, {StateKey("user", "alice"): ALICE, AUTH: state}) == []
    with pytest.raises(ArgumentError, match=r"ssh_keys\[0\]"):
        operation.requests(operation.check_args({"user": "alice", "own_keys": ["bad key"]}))
