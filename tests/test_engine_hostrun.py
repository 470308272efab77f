"""Diffs with secrets masked, and the fact cache's predicted effects."""

from provision.engine.hostrun import HostRun, mask_secrets
from provision.engine.statecache import IDENTITY
from provision.inventory.model import Host
from provision.operations.base import UNKNOWN, StateKey, Write


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


def test_a_fact_read_before_a_change_is_trusted_only_where_the_change_states_it():
    from provision.engine.statecache import StateCache, scope_of
    from provision.operations.base import Run, UserEntry

    cache = StateCache()
    a, b, user, probe = (
        StateKey("file", "/a"),
        StateKey("file", "/etc/b"),
        StateKey("user", "u"),
        StateKey("command", "grep x /a"),
    )
    for key in (a, b, user, probe, IDENTITY):
        cache.store(key, None, 0)
    cache.plan(scope_of(Write("/a", b"x")))
    assert cache.value(a).content == b"x"  # stated exactly by the write
    assert cache.known(b)  # another path: the write states it left it alone
    assert cache.value(probe) is UNKNOWN and cache.value(user) is UNKNOWN  # not stated: read again
    cache.store(user, UserEntry("u", 5, 5, "/home/u", "/bin/sh"), 1)
    cache.plan(scope_of(Run("mkdir -p ~u/.ssh", "d", touches=("~u/.ssh",))))
    assert cache.known(b) and cache.known(a)  # ~u resolves to /home/u: no overlap
    cache.plan(scope_of(Run("apt-get install x", "i")))  # may alter anything
    assert not cache.known(a) and not cache.known(b) and cache.known(IDENTITY)
    assert cache.hint(a).content == b"x"  # kept as a hint for --check, never trusted


def test_os_and_package_manager_survive_a_command():
    # issue 15: what no command of a run changes (names and keys, OS family, package manager) stays
    # trusted after a command that may alter anything, also in --check where nothing is read again
    from provision.engine.statecache import StateCache, scope_of
    from provision.operations.base import Run

    cache = StateCache()
    os_key, manager, other = StateKey("os"), StateKey("pkgmgr"), StateKey("file", "/a")
    for key, value in ((IDENTITY, {"hostname": "h"}), (os_key, "rocky"), (manager, "dnf"), (other, None)):
        cache.store(key, value, 0)
    cache.plan(scope_of(Run("echo anything", "c")))
    assert cache.value(os_key) == "rocky" and cache.value(manager) == "dnf" and cache.known(IDENTITY)
    assert cache.value(other) is UNKNOWN


def test_stderr_reason_from_the_node_is_printable():
    import pytest

    from provision.engine.hostrun import HostFailed
    from provision.transport.options import CommandResult

    class Session:
        def run(self, command, stdin):
            return CommandResult("", "sudo: \x1b[2J\x1b]0;owned\x07a password is required\n", 1)

    run = HostRun(Host("h"), session=Session())
    with pytest.raises(HostFailed) as raised:
        run.round_trip([IDENTITY], True, apply=False)
    assert "\x1b" not in str(raised.value) and "\x07" not in str(raised.value) and "a password is required" in str(raised.value)
    assert "\x1b" not in run.error and run.error.startswith("become (sudo) failed")


def test_password_never_in_repr():
    from provision.engine.hostrun import HostRun
    from provision.engine.runner import RunOptions
    from provision.inventory.model import Host

    run = HostRun(Host("n1", "127.0.0.1"), None, password="Secr3t-pw")
    assert "Secr3t-pw" not in repr(run) and "Secr3t-pw" not in repr(RunOptions(become_password="Secr3t-pw"))


def test_no_log_hides_failure_output():
    from provision.engine.hostrun import NO_LOG, TaskResult

    result = TaskResult("n1", "p", "t", "f:1", no_log=True)
    result.message = "cat: /etc/secret: token=abc"
    assert result.message == NO_LOG and TaskResult("n1", "p", "t", "f:1", message="x").message == "x"


def test_a_task_whose_first_change_fails_shows_that_failure(monkeypatch):
    # A task with two changes (a clone per prefix): the first fails, the second never runs. The
    # task used to read "aborted: not applied", its failure output lost (no failed line, no reason).
    import pytest

    from provision.engine import hostrun
    from provision.engine.hostrun import HostFailed, TaskResult
    from provision.engine.script import Step
    from provision.operations.base import Run
    from provision.transport.options import CommandResult

    monkeypatch.setattr(hostrun, "new_nonce", lambda: "n0")

    class Session:
        def run(self, command, stdin, **_options):
            out = "@@n0@@ begin\n@@n0@@ step 0\nmkdir: cannot create directory '/x': Permission denied\n\n@@n0@@ rc 0 1\n"
            return CommandResult(out, "", 0)

    seen = []
    run = HostRun(Host("h"), session=Session(), on_result=seen.append)
    result = TaskResult("h", "p", "clone", "f:1")
    for command in ("mkdir /x", "mkdir /y"):
        change = Run(command, command)
        run.plan(change, result, Step(change, True))
    run.finish(result)
    with pytest.raises(HostFailed):
        run.flush()
    assert seen == [result] and result.status == "failed"
    assert result.message == "mkdir: cannot create directory '/x': Permission denied"
