"""The round-trip script: built and parsed without SSH, run by a real local sh."""

import os
import subprocess

import pytest

from provision.engine.script import Step, build_script, parse_output, remote_command, stdin_for, write_command
from provision.errors import ArgumentError, ParseError
from provision.operations.base import Run, StateKey, Write


def run_local(script: str) -> str:
    return subprocess.run(["sh", "-s"], input=script, capture_output=True, text=True).stdout


def test_changes_then_facts_in_one_script(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("old\n")
    steps = [Step(Write(str(target), b"new\n", mode=0o600), True), Step(Run("echo done", "x"), True)]
    out = parse_output(run_local(build_script(steps, [StateKey("file", str(target))], "n0nce", False)), "n0nce")
    assert out.complete and [(i, c) for i, c, _ in out.steps] == [(0, 0), (1, 0)] and out.steps[1][2] == "done"
    assert target.read_text() == "new\n" and (target.stat().st_mode & 0o777) == 0o600
    assert (tmp_path / "f.txt.provision~").read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir() if "provision-tmp" in p.name] == []
    assert out.facts[0].startswith("regular file|600|")


def test_stops_at_first_failed_change(tmp_path):
    steps = [Step(Run("echo before; false", "a"), True), Step(Run(f"touch {tmp_path}/never", "b"), True)]
    out = parse_output(run_local(build_script(steps, [StateKey("systemd")], "n", False)), "n")
    assert out.steps == [(0, 1, "before")] and not out.complete and out.facts == {}
    assert not (tmp_path / "never").exists()


def test_write_into_missing_folder_fails_cleanly(tmp_path):
    out = parse_output(run_local(build_script([Step(Write(str(tmp_path / "no" / "f"), b"x"), True)], [], "n", False)), "n")
    assert out.steps[0][1] != 0 and "does not exist" in out.steps[0][2]


def test_forged_frames_without_the_nonce_are_plain_output():
    script = build_script([Step(Run("echo '@@other@@ end'; echo '@@n@@ rc 0 0 x'", "forge"), True)], [], "n", False)
    out = parse_output(run_local(script), "n")
    assert out.complete and out.steps[0][1] == 0 and "@@other@@ end" in out.steps[0][2]


def test_inconsistent_frames_rejected():
    with pytest.raises(ParseError):
        parse_output("@@n@@ begin\n@@n@@ rc 3 0\n", "n")


def test_connection_lost_mid_change():
    out = parse_output("@@n@@ begin\n@@n@@ step 0\npartial", "n")
    assert out.steps == [(0, -1, "connection lost while the change was running")] and not out.complete


def test_become_password_goes_on_stdin_only():
    command = remote_command(True)
    assert "s3cret" not in command and "sudo -n" in command and "sudo -S -p '' -v" in command
    assert "mktemp)" not in command and "/tmp" not in command  # nothing run from /tmp (noexec there works)
    assert stdin_for("echo hi\n", True, "s3cret") == b"s3cret\necho hi\n"
    assert stdin_for("echo hi\n", True, None) == b"\necho hi\n"
    assert remote_command(False) == "sh -s" and stdin_for("x", False, "pw") == b"x"
    with pytest.raises(ValueError):
        stdin_for("x", True, "a\nb")


def test_askpass_helper_prints_the_password(tmp_path):
    # The helper script the become wrapper writes, run for real: it prints $PROVISION_BECOME.
    command = remote_command(True)
    helper = command.split("printf '#!", 1)[1].split("' >", 1)[0]
    helper = "#!" + helper
    script = subprocess.run(["sh", "-c", f"printf '{helper}'"], capture_output=True, text=True).stdout
    (tmp_path / "askpass").write_text(script)
    printed = subprocess.run(["sh", str(tmp_path / "askpass")], env={"PROVISION_BECOME": "p w$d"}, capture_output=True, text=True)
    assert printed.stdout == "p w$d\n"


def test_home_paths_resolved_before_use():
    command = write_command(Write("~nosuchuser9/.ssh/x", b"k"))
    from provision.engine.script import change_command

    out = subprocess.run(["sh", "-c", change_command(Write("~nosuchuser9/.ssh/x", b"k"))], capture_output=True, text=True)
    assert out.returncode == 91 and "no such user: nosuchuser9" in out.stderr and "${H_" in command


def test_become_user_runs_the_change_as_that_user():
    script = build_script([Step(Run("id -un", "who"), True, "nobody")], [], "n", True)
    assert "runuser -u nobody -- sh -s <<'PROVISION_n_0'\n( id -un\n) </dev/null\nPROVISION_n_0\n" in script
    with pytest.raises(ArgumentError, match="user name 'bad user'"):
        build_script([Step(Run("id", "x"), True, "bad user")], [], "n", True)


def test_home_paths_are_acted_on_and_read_as_their_user():
    # The one rule (provision.engine.acting): a change or fact on ~alice/ runs as alice, its shell
    # on her sh's stdin (a quoted here-document), never in argv.
    steps = [Step(Write("~alice/.ssh/authorized_keys", b"SECRET-CONTENT"), True)]
    script = build_script(steps, [StateKey("file", "~alice/.jupyter/c.py"), StateKey("file", "/etc/motd")], "n", True)
    assert "runuser -u alice -- sh -s <<'PROVISION_n_0'\n" in script
    assert "runuser -u alice -- sh -s <<'PROVISION_n_batch0'\n" in script and "PROVISION_n_batch1" not in script
    assert "sh -c" not in script
    assert build_script(steps, [], "n", False).count("runuser") == 0  # the login user's own script


def test_a_step_on_several_homes_is_refused():
    step = Step(Run('cp "${H_616c696365}"/x "${H_626f62}"/x', "copy"), True)
    out = parse_output(run_local(build_script([step], [], "n", True)), "n")
    assert out.steps[0][1] == 1 and "homes of several users (alice, bob)" in out.steps[0][2]


def test_no_login_step_drops_to_the_login_user_on_stdin():
    script = build_script([Step(Run("id -un", "who"), False)], [], "n", True)
    assert "runuser -u \"$SUDO_USER\" -- sh -s <<'PROVISION_n_0'" in script


def test_secret_write_is_0600_and_its_backup_narrowed(tmp_path):
    target = tmp_path / "app.key"
    target.write_text("old secret\n")
    target.chmod(0o644)
    run_local(build_script([Step(Write(str(target), b"new\n", mode=0o600), True)], [], "n", False))
    backup = tmp_path / "app.key.provision~"
    assert backup.read_text() == "old secret\n" and (backup.stat().st_mode & 0o7777) == 0o600
    fresh = tmp_path / "new.key"
    run_local(build_script([Step(Write(str(fresh), b"s", secret=True), True)], [], "n", False))
    assert (fresh.stat().st_mode & 0o777) == 0o600


def test_backup_name_planted_as_a_link_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    victim.chmod(0o644)
    target = tmp_path / "f"
    target.write_text("old\n")
    (tmp_path / "f.provision~").symlink_to(victim)
    run_local(build_script([Step(Write(str(target), b"new\n", mode=0o600), True)], [], "n", False))
    assert victim.read_text() == "keep\n" and (victim.stat().st_mode & 0o777) == 0o644
    assert not (tmp_path / "f.provision~").is_symlink() and (tmp_path / "f.provision~").read_text() == "old\n"


def test_each_step_stopped_after_its_own_limit(tmp_path):
    """Issue 15: time limits per step. A step past its limit is killed with its children and
    says so; the next steps do not run; a step's own timeout wins over the run's."""
    import time

    from provision.engine.script import round_trip_limit, step_limit, upload_prelude
    from provision.engine.user_shells import PRIVATE_GRACE

    steps = [
        Step(Run("echo quick", "a"), True),
        Step(Run(f"sh -c 'sleep 30; touch {tmp_path}/child' & wait", "b", timeout=1), True),
        Step(Run(f"touch {tmp_path}/never", "c"), True),
    ]
    started = time.monotonic()
    out = parse_output(run_local(build_script(steps, [], "n", False, step_timeout=20)), "n")
    assert time.monotonic() - started < 15
    assert out.steps[0] == (0, 0, "quick") and out.steps[1][:2] == (1, 124) and len(out.steps) == 2
    assert "step stopped after 1s" in out.steps[1][2]
    assert not (tmp_path / "never").exists()
    assert round_trip_limit(steps, 20, 300) == 300 + (20 + 10) + (1 + 10) + (20 + 10) + 3 * PRIVATE_GRACE
    limited = step_limit("echo 'x'", 5, "D")
    assert limited.startswith("timeout -k 10 5 sh -s <<'D'\n( echo 'x'\n) </dev/null\nD\n")  # on stdin, never in argv
    assert upload_prelude(None) == "" and upload_prelude("/var/tmp/provision-upload.ab") == (
        "PROVISION_UPLOADS=/var/tmp/provision-upload.ab; export PROVISION_UPLOADS\n"
    )


def test_a_backup_never_narrows_a_file_that_has_other_names(tmp_path):
    """Issue 33: the old file is kept by a rename from a private folder; one with other names
    (a hard link a user made to a root file) is copied there, never narrowed in place."""
    other = tmp_path / "sudo-like"
    other.write_text("old\n")
    other.chmod(0o4755)
    target = tmp_path / "f"
    os.link(other, target)
    run_local(build_script([Step(Write(str(target), b"new\n", mode=0o600), True)], [], "n", False))
    assert (other.stat().st_mode & 0o7777) == 0o4755 and other.read_text() == "old\n"
    backup = tmp_path / "f.provision~"
    assert backup.read_text() == "old\n" and backup.stat().st_ino != other.stat().st_ino
    assert (backup.stat().st_mode & 0o7777) == 0o600
    assert [p.name for p in tmp_path.iterdir() if "provision-tmp" in p.name] == []


def test_a_write_replaces_a_link_at_its_name_never_writes_through_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    target = tmp_path / "f"
    target.symlink_to(victim)
    run_local(build_script([Step(Write(str(target), b"new\n"), True)], [], "n", False))
    assert victim.read_text() == "keep\n" and not target.is_symlink() and target.read_text() == "new\n"
    assert not (tmp_path / "f.provision~").exists()  # a link is not a file to keep
