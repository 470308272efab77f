"""Host key policy: fingerprints, strict refusal, accept-new appends only."""

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from provision.hostkeys import AcceptNewPolicy, HostKeyUnknown, StrictPolicy, fingerprint, make_client


def new_key() -> paramiko.PKey:
    public = ed25519.Ed25519PrivateKey.generate().public_key()
    raw = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    kind, data = raw.split()
    return paramiko.PKey.from_type_string(kind, __import__("base64").b64decode(data))


def test_fingerprint_matches_openssh_format():
    key = new_key()
    assert fingerprint(key).startswith("SHA256:") and "=" not in fingerprint(key) and len(fingerprint(key)) == 50


def test_strict_refuses_with_fingerprint(tmp_path):
    key = new_key()
    with pytest.raises(HostKeyUnknown) as error:
        StrictPolicy(tmp_path / "kh").missing_host_key(None, "[127.0.0.1]:2222", key)
    assert fingerprint(key) in str(error.value)


def test_accept_new_appends_without_rewriting(tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("# my notes\nexisting ssh-ed25519 AAAA\n")
    client = make_client(known, accept_new=True)
    key = new_key()
    AcceptNewPolicy(known).missing_host_key(client, "[10.0.0.1]:22", key)
    lines = known.read_text().splitlines()
    assert lines[:2] == ["# my notes", "existing ssh-ed25519 AAAA"]
    assert lines[2] == f"[10.0.0.1]:22 ssh-ed25519 {key.get_base64()}"


def test_client_trusts_only_given_file(tmp_path):
    known = tmp_path / "known_hosts"
    key = new_key()
    known.write_text(f"node1 ssh-ed25519 {key.get_base64()}\n")
    client = make_client(known, accept_new=False)
    assert client.get_host_keys().lookup("node1") is None  # user keys empty...
    assert client._system_host_keys.lookup("node1")["ssh-ed25519"] == key  # ...trusted keys from the file
