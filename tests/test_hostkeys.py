"""Host key policy on real known_hosts files: strict, accept-new, changed, revoked, cert-authority."""

import base64
import shutil
import socket
import subprocess

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from provision.transport.hostkeys import (
    HostCertificateNotVerified,
    HostKeyChanged,
    HostKeyRevoked,
    HostKeyUnknown,
    KnownHostsPolicy,
    fingerprint,
    make_client,
)
from provision.transport.known_hosts import KnownHostsFiles, host_matches


def new_key() -> paramiko.PKey:
    public = ed25519.Ed25519PrivateKey.generate().public_key()
    raw = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    kind, data = raw.split()
    return paramiko.PKey.from_type_string(kind, base64.b64decode(data))


def policy(name, user=(), global_=(), accept_new=False, hash_new=False):
    return KnownHostsPolicy(name, KnownHostsFiles(tuple(user), tuple(global_), hash_new), accept_new)


def test_fingerprint_matches_openssh_format():
    key = new_key()
    assert fingerprint(key).startswith("SHA256:") and "=" not in fingerprint(key) and len(fingerprint(key)) == 50
    assert fingerprint(key.asbytes()) == fingerprint(key)


@pytest.mark.skipif(not shutil.which("ssh-keygen"), reason="needs OpenSSH's ssh-keygen")
def test_fingerprint_is_ssh_keygens(tmp_path):
    key = new_key()
    (tmp_path / "k.pub").write_text(f"ssh-ed25519 {key.get_base64()}\n")
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(tmp_path / "k.pub")], capture_output=True, text=True, check=True
    )
    assert out.stdout.split()[1] == fingerprint(key)


def test_strict_refuses_unknown_naming_host_key_and_files(tmp_path):
    key = new_key()
    with pytest.raises(HostKeyUnknown) as error:
        policy("[127.0.0.1]:2222", [tmp_path / "kh"], [tmp_path / "global"]).missing_host_key(None, "[127.0.0.1]:2222", key)
    message = str(error.value)
    assert fingerprint(key) in message and "[127.0.0.1]:2222" in message
    assert str(tmp_path / "kh") in message and str(tmp_path / "global") in message


def test_key_in_global_file_accepted(tmp_path):
    key = new_key()
    site = tmp_path / "ssh_known_hosts"
    site.write_text(f"node1,node2 ssh-ed25519 {key.get_base64()}\n")
    policy("node2", [tmp_path / "missing"], [site]).missing_host_key(None, "node2", key)  # no exception: trusted
    with pytest.raises(HostKeyUnknown):
        policy("node3", [tmp_path / "missing"], [site]).missing_host_key(None, "node3", key)


def test_changed_key_refused_naming_file_and_line(tmp_path):
    old, got = new_key(), new_key()
    known = tmp_path / "kh"
    known.write_text(f"# notes\nnode1 ssh-ed25519 {old.get_base64()}\n")
    with pytest.raises(HostKeyChanged) as error:
        policy("node1", [known], accept_new=True).missing_host_key(None, "node1", got)
    assert f"{known}:2" in str(error.value) and fingerprint(old) in str(error.value) and fingerprint(got) in str(error.value)
    assert known.read_text().count("\n") == 2  # accept-new never records over a changed key


def test_revoked_refused_even_with_accept_new_and_even_if_listed(tmp_path):
    key = new_key()
    known = tmp_path / "kh"
    known.write_text(f"node1 ssh-ed25519 {key.get_base64()}\n")
    site = tmp_path / "site"
    site.write_text(f"@revoked * ssh-ed25519 {key.get_base64()}\n")
    before = known.read_bytes()
    for accept_new in (False, True):
        with pytest.raises(HostKeyRevoked) as error:
            policy("node1", [known], [site], accept_new=accept_new).missing_host_key(None, "node1", key)
        assert f"{site}:1" in str(error.value) and "REVOKED" in str(error.value)
    # Unknown elsewhere, revoked: accept-new must not record it.
    with pytest.raises(HostKeyRevoked):
        policy("node9", [known], [site], accept_new=True).missing_host_key(None, "node9", key)
    assert known.read_bytes() == before


def test_cert_authority_says_certificates_are_not_verified(tmp_path):
    ca, key = new_key(), new_key()
    site = tmp_path / "site"
    site.write_text(f"@cert-authority *.cluster ssh-ed25519 {ca.get_base64()}\n")
    with pytest.raises(HostCertificateNotVerified) as error:
        policy("n01.cluster", [tmp_path / "kh"], [site]).missing_host_key(None, "n01.cluster", key)
    message = str(error.value)
    assert "n01.cluster" in message and "certificate" in message and f"{site}:1" in message and "unknown" not in message


def test_accept_new_appends_to_first_user_file_with_newline_first(tmp_path, capsys):
    first, second = tmp_path / "kh1", tmp_path / "kh2"
    first.write_bytes(b"# my notes\nexisting ssh-ed25519 AAAA")  # no trailing newline
    second.write_text("")
    key = new_key()
    policy("[10.0.0.1]:2200", [first, second], accept_new=True).missing_host_key(None, "[10.0.0.1]:2200", key)
    # Said, as ssh(1) says "Permanently added": naming the host, the key's fingerprint and the file.
    said = capsys.readouterr().err
    assert f"added [10.0.0.1]:2200's ssh-ed25519 key {fingerprint(key)} to {first}" in said
    assert first.read_text() == f"# my notes\nexisting ssh-ed25519 AAAA\n[10.0.0.1]:2200 ssh-ed25519 {key.get_base64()}\n"
    assert second.read_text() == ""
    # Now trusted without accept-new; and OpenSSH's own tool finds the appended line.
    policy("[10.0.0.1]:2200", [first, second]).missing_host_key(None, "[10.0.0.1]:2200", key)
    if shutil.which("ssh-keygen"):
        found = subprocess.run(["ssh-keygen", "-F", "[10.0.0.1]:2200", "-f", str(first)], capture_output=True, text=True)
        assert found.returncode == 0 and key.get_base64() in found.stdout


def test_accept_new_writes_hashed_names_when_configured(tmp_path):
    known = tmp_path / "sub" / "kh"  # the folder is created
    key = new_key()
    policy("node1", [known], accept_new=True, hash_new=True).missing_host_key(None, "node1", key)
    (field, kind, data) = known.read_text().split()
    assert field.startswith("|1|") and host_matches(field, "node1") and (kind, data) == ("ssh-ed25519", key.get_base64())
    if shutil.which("ssh-keygen"):
        assert subprocess.run(["ssh-keygen", "-F", "node1", "-f", str(known)], capture_output=True).returncode == 0


def test_server_asked_for_the_known_key_type_first(tmp_path):
    known = tmp_path / "kh"
    known.write_text(f"node1 ecdsa-sha2-nistp256 {paramiko.ECDSAKey.generate().get_base64()}\n")
    client, chosen = make_client("node1", 22, {"userknownhostsfile": str(known), "globalknownhostsfile": "none"}, None, False)
    assert client._policy is chosen and chosen.files.user == (known,) and chosen.files.global_ == ()
    ours, theirs = socket.socketpair()
    with ours, theirs:
        transport = chosen.transport_factory(ours)  # made as SSHClient.connect makes it, not started
        assert transport.get_security_options().key_types[0] == "ecdsa-sha2-nistp256"
        # AES-GCM offered first (issue 28: no per-packet HMAC in Python); CTR still offered after it
        ciphers = transport.get_security_options().ciphers
        assert ciphers[:2] == ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com") and "aes128-ctr" in ciphers
