"""Diffs with secrets masked, and the fact cache's predicted effects."""

from provision.engine.hostrun import HOSTINFO, HostRun, mask_secrets, unified_diff
from provision.inventory import Host
from provision.operations.base import UNKNOWN, FactKey, Write
from provision.operations.system import EVERYTHING


def test_mask_secrets():
    text = "user=a\npassword = hunter2\nc.PasswordIdentityProvider.hashed_password: 'argon2:xyz'\ntoken=abc\n"
    masked = mask_secrets(text)
    assert "hunter2" not in masked and "argon2:xyz" not in masked and "abc" not in masked and "user=a" in masked
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----"
    assert "AAAA" not in mask_secrets(key)


def test_mask_secrets_hides_a_multi_word_value_to_the_end_of_its_line():
    masked = mask_secrets("password: my secret phrase\nsecret = two words \r\nname: kept\n")
    assert "secret phrase" not in masked and "phrase" not in masked and "two words" not in masked
    assert masked == "password: ********\nsecret = ********\r\nname: kept\n"


def test_unified_diff_new_changed_secret():
    assert "+line\n" in unified_diff(Write("/etc/x", b"line\n"))
    diff = unified_diff(Write("/etc/x", b"a\nb\n", old=b"a\n"))
    assert "--- /etc/x (before)" in diff and "+b" in diff
    assert "hidden" in unified_diff(Write("/etc/x", b"pw", secret=True))


def test_effects_predict_and_invalidate():
    run = HostRun(Host("h"), session=None)
    run.facts = {HOSTINFO: {"hostname": "h"}, FactKey("file", "/a"): None, FactKey("user", "u"): None}
    run.record_effects(Write("/a", b"x").effects)
    assert run.facts[FactKey("file", "/a")].content == b"x"
    run.record_effects(((FactKey("user", "u"), UNKNOWN),))
    assert FactKey("user", "u") not in run.facts and FactKey("user", "u") in run.invalidated
    run.facts[FactKey("os")] = "rocky"  # issue 15: the OS family and package manager survive a command
    run.facts[FactKey("pkgmgr")] = "dnf"
    run.record_effects(((EVERYTHING, UNKNOWN),))
    assert set(run.facts) == {HOSTINFO, FactKey("os"), FactKey("pkgmgr")} and run.facts_hostname() == "h"


def test_stderr_reason_from_the_node_is_printable():
    import pytest

    from provision.connection import CommandResult
    from provision.engine.hostrun import HostFailed

    class Session:
        def run(self, command, stdin):
            return CommandResult("", "sudo: \x1b[2J\x1b]0;owned\x07a password is required\n", 1)

    run = HostRun(Host("h"), session=Session())
    with pytest.raises(HostFailed) as raised:
        run.round_trip([HOSTINFO], True, apply=False)
    assert "\x1b" not in str(raised.value) and "\x07" not in str(raised.value) and "a password is required" in str(raised.value)
    assert "\x1b" not in run.error and run.error.startswith("become (sudo) failed")
