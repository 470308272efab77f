"""A user's shells inside root's round trip (provision/engine/user_shells.py): her reads in one
shell of hers, her output through a private file, never on the round trip's stdout.

The real runuser runs on real nodes (test_paths_attacks.py, test_roles_attacks.py,
test_user_shells_cluster.py). Here a TEST STAND-IN ``runuser`` on PATH, which runs ``sh -s`` as the
caller, checks the script under a real sh: the framing, the private files, what reaches the stream.
"""

import base64
import os
import signal
import subprocess

import pytest

from provision.engine.script import Step, build_script, parse_output
from provision.engine.user_shells import batch_facts, batch_nonce, fact_batches
from provision.errors import ParseError
from provision.operations.base import Run, StateKey
from provision.operations.paths import LOGIN_USER

NONCE = "0123456789abcdef01234567"


def fake_runuser(tmp_path):
    """TEST STAND-INS for ``runuser -u USER -- sh -s`` (logs USER, runs sh -s as the caller) and
    for ``id -u -- USER`` (alice, bob and the login user, admin, exist)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "runuser.log"
    tool = folder / "runuser"
    tool.write_text(f'#!/bin/sh\n[ "$1" = -u ] && [ "$3" = -- ] || exit 99\necho "$2" >>{log}\nshift 3\nexec "$@"\n')
    tool.chmod(0o755)
    users = folder / "id"  # alice, bob and the login user exist; anyone else asks the real id
    users.write_text(
        '#!/bin/sh\ncase "$1 $2 $3" in "-u -- alice"|"-u -- bob"|"-u -- admin") echo 1000;; *) exec /usr/bin/id "$@";; esac\n'
    )
    users.chmod(0o755)
    env = {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}", "SUDO_USER": "admin"}
    return env, log


def run_root_script(script: str, env: dict) -> str:
    return subprocess.run(["sh", "-s"], input=script, capture_output=True, text=True, env=env, timeout=60).stdout


def user_keys():
    return [
        StateKey("command", "exit 10", "alice"),
        StateKey("command", "exit 11", "root"),
        StateKey("command", "exit 12", "bob"),
        StateKey("command", "exit 13", "alice"),
        StateKey("command", "exit 14", LOGIN_USER),
        StateKey("command", "exit 15", "bob"),
    ]


def test_each_users_reads_run_in_one_shell_of_hers(tmp_path):
    keys = user_keys()
    env, log = fake_runuser(tmp_path)
    assert fact_batches(keys, True) == [("alice", [0, 3]), ("bob", [2, 5]), ('"$SUDO_USER"', [4])]
    out = parse_output(run_root_script(build_script([], keys, NONCE, True), env), NONCE, fact_batches(keys, True))
    assert log.read_text().split() == ["alice", "bob", "admin"]  # one shell per user, not one per read
    assert out.complete and out.facts == {i: f"{10 + i}\n" for i in range(6)}


def test_a_users_shell_never_sees_the_runs_frame_marker():
    script = build_script([], user_keys(), NONCE, True)
    for number in range(3):
        start = script.index(f"<<'PROVISION_{NONCE}_batch{number}'\n")
        body = script[script.index("\n", start) + 1 : script.index(f"\nPROVISION_{NONCE}_batch{number}\n")]
        assert NONCE not in body and batch_nonce(NONCE, number) in body
    assert "export PROVISION_FRAME" not in script and "set -a" not in script


@pytest.mark.parametrize("user", ["alice", None], ids=["a change as alice", "a root change that runs her process"])
def test_what_a_users_process_writes_after_her_shell_ended_reaches_no_read(tmp_path, user):
    # Her change leaves a process writing "absent" until told to stop. Before, it held the round
    # trip's stdout: its lines landed in root's reads and bob's, and the round trip waited for it.
    # Now it holds a private pipe that root drains until 1 s after the change ended: the reads are
    # intact, the output says it was closed, the round trip ends while she still writes, and her
    # next write fails (no reader is left).
    target, stop, failed = tmp_path / "motd", tmp_path / "stop", tmp_path / "failed"
    target.write_text("hello")
    writer = (
        f"( trap '' PIPE; n=0; while [ ! -e {stop} ] && [ $n -lt 3000 ]; do "
        f"echo absent || {{ touch {failed}; break; }}; n=$((n + 1)); sleep 0.01; done ) &"
    )
    steps = [Step(Run(writer, "leave a writer"), True, user)]  # root's: as files.py's runuser -u OWNER chmod
    keys = [StateKey("file", str(target)), StateKey("command", "exit 3", "bob")]
    env, _log = fake_runuser(tmp_path)
    try:
        text = run_root_script(build_script(steps, keys, NONCE, True), env)
        for _ in range(200):  # her writes fail soon after: wait for it (up to 10 s), no timing asserted
            if failed.exists():
                break
            subprocess.run(["sleep", "0.05"])
        assert failed.exists() and not stop.exists()
    finally:
        stop.touch()
    out = parse_output(text, NONCE, fact_batches(keys, True))
    assert out.complete and out.steps[0][:2] == (0, 0) and out.steps[0][2].endswith("a process it left behind held it")
    assert out.facts == {0: f"regular file|644|root|root|5\n={base64.b64encode(b'hello').decode()}\n", 1: "3\n"}
    assert "absent" not in text.split(f"@@{NONCE}@@ rc 0 0\n")[1]


def test_a_changes_endless_output_keeps_its_last_mebibyte_and_the_change_its_status(tmp_path):
    env, _log = fake_runuser(tmp_path)
    step = Step(Run("head -c 50000000 /dev/zero | tr '\\0' a; echo; echo the end", "endless"), True, "alice")
    out = parse_output(run_root_script(build_script([step], [], NONCE, True), env), NONCE)
    assert out.complete and out.steps[0][:2] == (0, 0) and out.steps[0][2].endswith("a\nthe end")


def test_a_changes_output_as_a_user_still_reaches_its_task(tmp_path):
    env, _log = fake_runuser(tmp_path)
    steps = [Step(Run("echo made; echo warned >&2; exit 4", "as alice"), True, "alice")]
    out = parse_output(run_root_script(build_script(steps, [], NONCE, True), env), NONCE)
    assert out.steps == [(0, 4, "made\nwarned")]


def test_the_private_folder_is_made_before_the_first_frame_and_removed(tmp_path):
    env, _log = fake_runuser(tmp_path)
    before = set(os.listdir("/tmp"))
    script = build_script([], user_keys(), NONCE, True)
    assert script.index("mktemp -d /tmp/.provision-own.") < script.index(" begin\\n")
    run_root_script(script, env)
    assert {name for name in set(os.listdir("/tmp")) - before if name.startswith(".provision-own.")} == set()
    assert "PROVISION_OWN" not in build_script([], [StateKey("command", "exit 0", "root")], NONCE, True)


def batch_output(batch_body: str, *root_facts: int) -> str:
    """A round trip's output: batch 0 (alice's) with ``batch_body``, then root's reads."""
    roots = "".join(f"@@{NONCE}@@ fact {index}\n0\n\n" for index in root_facts)
    return f"@@{NONCE}@@ begin\n@@{NONCE}@@ batch 0\n{batch_body}\n{roots}@@{NONCE}@@ end\n"


def test_a_user_forging_another_reads_frame_fails_the_host():
    # A process of hers sharing her shell's output (ptrace, pidfd_getfd) adds her batch's frame
    # for fact 1, which root reads: believed nowhere.
    marker = batch_nonce(NONCE, 0)
    forged = f"@@{marker}@@ fact 0\n0\n\n@@{marker}@@ fact 1\n0\n\n@@{marker}@@ done\n"
    with pytest.raises(ParseError, match="the reads as alice printed a frame of another read"):
        parse_output(batch_output(forged, 1), NONCE, [("alice", [0])])


def test_a_user_repeating_her_own_reads_frame_fails_the_host():
    marker = batch_nonce(NONCE, 0)
    twice = f"@@{marker}@@ fact 0\n0\n\n@@{marker}@@ fact 0\n1\n\n@@{marker}@@ done\n"
    with pytest.raises(ParseError, match="another read"):
        parse_output(batch_output(twice), NONCE, [("alice", [0])])
    honest = f"@@{marker}@@ fact 0\n0\n\n@@{marker}@@ done\n"
    assert parse_output(batch_output(honest, 1), NONCE, [("alice", [0])]).facts == {0: "0\n", 1: "0\n"}


def test_a_frame_hidden_behind_a_partial_line_fails_the_host_instead_of_reading_as_absent():
    marker = batch_nonce(NONCE, 0)
    hidden = f"x@@{marker}@@ fact 2\nregular file|600|bob|bob|9\n@@{marker}@@ done\n"
    with pytest.raises(ParseError, match="the reads as bob were cut short"):
        batch_facts(hidden, marker, [2], "bob")
    cut = f"@@{marker}@@ fact 2\nregular file|600|bob|bob|9\n@@{marker}@@ fact 3\n"  # no done
    with pytest.raises(ParseError, match="cut short"):
        batch_facts(cut, marker, [2, 3], "bob")
    with pytest.raises(ParseError, match="after their end"):
        batch_facts(f"@@{marker}@@ fact 2\n\n@@{marker}@@ done\n@@{marker}@@ done\n", marker, [2], "bob")


def test_a_user_who_does_not_exist_reads_as_empty_as_her_missing_home_would(tmp_path):
    # root finds no such user (id) and says so: each of her reads is empty (a path reads as
    # absent), as when each read was its own runuser, which then failed.
    keys = [StateKey("command", "exit 10", "alice"), StateKey("file", "~ghost/.ssh/config")]
    env, log = fake_runuser(tmp_path)
    out = parse_output(run_root_script(build_script([], keys, NONCE, True), env), NONCE, fact_batches(keys, True))
    assert log.read_text().split() == ["alice"] and out.complete and out.facts == {0: "10\n", 1: ""}


def test_a_batch_that_printed_nothing_fails_the_host_instead_of_reading_as_absent():
    # her shell ran (root found her) but wrote nothing: /tmp full, or her shell killed at once.
    # Before, that read as "no such user": every fact of hers absent, her files written anew.
    text = f"@@{NONCE}@@ begin\n@@{NONCE}@@ batch 0\n\n@@{NONCE}@@ end\n"
    with pytest.raises(ParseError, match="the reads as alice were cut short"):
        parse_output(text, NONCE, [("alice", [0, 2])])
    nobody = f"@@{NONCE}@@ begin\n@@{NONCE}@@ nouser 0\n\n@@{NONCE}@@ end\n"
    assert parse_output(nobody, NONCE, [("alice", [0, 2])]).facts == {0: "", 2: ""}


def test_batch_frames_the_script_never_printed_are_forged():
    text = f"@@{NONCE}@@ begin\n@@{NONCE}@@ nouser 0\n@@{NONCE}@@ end\n"
    with pytest.raises(ParseError, match="unexpected batch frame 0"):
        parse_output(text, NONCE)  # no batch in this script
    with pytest.raises(ParseError, match="unexpected batch frame 0"):
        parse_output(text.replace("end", "batch 0\n") + f"@@{NONCE}@@ end\n", NONCE, [("alice", [0])])  # twice
    with pytest.raises(ParseError, match="fact 0 is read by a user"):
        parse_output(f"@@{NONCE}@@ begin\n@@{NONCE}@@ fact 0\nx\n", NONCE, [("alice", [0])])


def test_a_batch_cut_off_with_the_connection_leaves_no_fact_behind_it():
    out = parse_output(f"@@{NONCE}@@ begin\n@@{NONCE}@@ fact 0\nx\n", NONCE, [("alice", [1])])
    assert not out.complete and 1 not in out.facts


@pytest.mark.parametrize(("signal_number", "status"), [(signal.SIGHUP, 129), (signal.SIGTERM, 143), (signal.SIGPIPE, 141)])
def test_the_private_folder_goes_when_the_connection_drops(tmp_path, signal_number, status):
    # dash runs no EXIT trap on a signal: each one the script may get exits, and the EXIT trap runs
    # (once the change under way has ended, as dash runs a trap between commands). The shell starts
    # with every signal at its default, as sshd starts it (a signal ignored on entry, under nohup,
    # cannot be trapped).
    env, _log = fake_runuser(tmp_path)
    before = {name for name in os.listdir("/tmp") if name.startswith(".provision-own.")}
    script = build_script([Step(Run("sleep 2", "long"), True)], [], NONCE, True)

    def default_signals():
        for number in (signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(number, signal.SIG_DFL)

    shell = subprocess.Popen(
        ["sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True, preexec_fn=default_signals
    )
    shell.stdin.write(script)
    shell.stdin.close()
    for _ in range(200):
        made = {name for name in os.listdir("/tmp") if name.startswith(".provision-own.")} - before
        if made and os.path.exists(f"/tmp/{next(iter(made))}/step0"):
            break
        subprocess.run(["sleep", "0.05"])
    assert made
    shell.send_signal(signal_number)  # the controller gone
    assert shell.wait(timeout=30) == status
    assert not any(os.path.exists(f"/tmp/{name}") for name in made)


def test_the_login_users_own_script_needs_no_private_folder():
    # as_root False: the script runs as the login user, whose processes are hers alone (and who
    # may not own /tmp: the folder's check would refuse the run)
    script = build_script([Step(Run("echo hi", "x"), True)], [StateKey("command", "true")], NONCE, False)
    assert "PROVISION_OWN" not in script and "mkfifo" not in script
