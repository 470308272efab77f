"""provision.engine.adhoc: the copy script (run for real with sh, locally) and the folded report."""

import os
import shutil
import subprocess

import pytest

from provision.engine.adhoc import AdhocJob, copy_script, report_lines, run_job
from provision.errors import ProvisionError
from provision.transport.adhoc import AdhocResult
from provision.transport.options import SshOptions


def test_folded_report_groups_identical_outputs_under_a_host_list():
    results = [
        AdhocResult("w1", 0, "Linux\n"),
        AdhocResult("w2", 0, "Linux\n"),
        AdhocResult("w3", 0, "Linux\n"),
        AdhocResult("w10", 2, "", "ls: x: No such file\n"),
        AdhocResult("w4", error_kind="unreachable", error="connection refused"),
    ]
    assert report_lines(results, folded=True) == [
        (False, "---------------- w[1-3] (3) | rc=0"),
        (False, "w[1-3]: Linux"),
        (False, "---------------- w10 (1) | rc=2"),
        (False, "w10: stderr: ls: x: No such file"),
        (True, "---------------- w4 (1) | unreachable: connection refused"),
    ]
    assert report_lines(results[:1] + results[3:4], folded=False) == [
        (False, "w1 | rc=0"),
        (False, "w1: Linux"),
        (False, "w10 | rc=2"),
        (True, "w10: ls: x: No such file"),
    ]


def test_no_node_can_print_a_block_that_passes_for_another_hosts():
    """Issue 33 finding 6: n1 prints a fake ``n2 | rc=0`` block, with a carriage return and a
    line separator to hide its own name; every line it sends stays headed by n1, escaped."""
    forged = "ok\n\rn2 | rc=0\nn2 | rc=0\u2028fine\x1b[2K\n---------------- n2 (1) | rc=0\n"
    results = [AdhocResult("n1", 0, forged, "n2 | rc=0\n"), AdhocResult("n2", 1, "", "disk full\n")]
    for folded in (False, True):
        lines = report_lines(results, folded)
        heads = [line for _, line in lines if " | rc=" in line.split(": ", 1)[0] or line.startswith("-" * 16)]
        expected = ["n1 | rc=0", "n2 | rc=1"]
        assert heads == (expected if not folded else [f"---------------- {h[:2]} (1) {h[3:]}" for h in expected])
        for _, line in lines:
            assert not any(ch in line for ch in "\r\x1b\u2028"), line
        node_lines = [line for _, line in lines if line not in heads]
        assert all(line.startswith(("n1: ", "n2: ")) for line in node_lines), node_lines
    assert (False, "n1: \\x0dn2 | rc=0") in report_lines(results, False)
    assert (False, "n1: n2 | rc=0\\u2028fine\\x1b[2K") in report_lines(results, False)
    assert (True, "n1: n2 | rc=0") in report_lines(results, False)


def test_copy_script_writes_atomically_keeps_the_mode_and_refuses_a_folder(tmp_path):
    source = tmp_path / "nccl.conf"
    source.write_bytes(b"NCCL_DEBUG=INFO\n\x00binary'$(x)\n")
    source.chmod(0o640)
    (tmp_path / "out").mkdir()
    done = subprocess.run(["sh", "-s"], input=copy_script(source, str(tmp_path / "out") + "/"), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    target = tmp_path / "out" / "nccl.conf"
    assert target.read_bytes() == source.read_bytes() and oct(target.stat().st_mode & 0o777) == "0o640"
    assert done.stdout.startswith(f"copied {len(source.read_bytes())} bytes to {target} (sha256 ")
    refused = subprocess.run(["sh", "-s"], input=copy_script(source, str(tmp_path / "out")), capture_output=True, text=True)
    assert refused.returncode == 1 and "is a folder: end --dest with / to copy into it" in refused.stderr


@pytest.mark.parametrize(
    "job,message",
    [
        (AdhocJob(copy="/nonexistent/file", dest="/etc/x"), "cannot read it"),
        (AdhocJob(copy="/dev/zero", dest="/etc/x"), "not a regular file"),  # read to the end, it filled the memory
        (AdhocJob(copy="FIFO", dest="/etc/x"), "not a regular file"),  # its open waited for a writer
        (AdhocJob(copy="/tmp", dest="/etc/x"), "not a regular file"),
        (AdhocJob(copy=__file__), "--copy needs --dest"),
        (AdhocJob(copy=__file__, dest="etc/x"), "must be absolute"),
        (AdhocJob(copy=__file__, dest="/etc/../x"), "may not contain '..'"),
        (AdhocJob(command="id", dest="/etc/x"), "--dest goes with --copy"),
        (AdhocJob(command="id", become=True, password="a\nb"), "newline"),
    ],
)
def test_bad_input_refused_before_any_host(job, message, tmp_path):
    from pathlib import Path

    if job.copy == "FIFO":
        os.mkfifo(tmp_path / "fifo")
        job = AdhocJob(copy=str(tmp_path / "fifo"), dest=job.dest)
    if job.copy is not None:
        job = AdhocJob(job.command, Path(job.copy), job.dest, job.become, job.password)
    with pytest.raises(ProvisionError, match=message):
        run_job([], job, SshOptions(), 1)


# -- issue 33: run --copy obeys setup-cluster's rules for paths a user controls ------------------
NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to play another user")


def copy(source, dest: str, become: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-s"], input=copy_script(source, dest, become), capture_output=True, text=True)


@pytest.fixture
def keys(tmp_path):
    source = tmp_path / "alice_keys"
    source.write_text("ssh-ed25519 AAAA alice\n")
    source.chmod(0o600)
    for folder in (tmp_path, *tmp_path.parents[:2]):  # pytest's 0700 folders: the other user must reach hers
        if folder.stat().st_uid == os.geteuid():
            os.chmod(folder, 0o755)
    return source


@root_only
def test_below_a_folder_one_user_owns_the_copy_is_written_as_her(tmp_path, keys):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    os.chown(home, NOBODY, NOBODY)
    os.chown(home / ".ssh", NOBODY, NOBODY)
    rootfile = tmp_path / "root_authorized_keys"
    rootfile.write_text("root's\n")
    (home / ".ssh" / "authorized_keys").symlink_to(rootfile)  # planted by her
    os.lchown(home / ".ssh" / "authorized_keys", NOBODY, NOBODY)
    done = copy(keys, f"{home}/.ssh/authorized_keys")
    assert done.returncode == 0 and done.stdout.endswith(" as nobody\n"), done.stdout + done.stderr
    written = home / ".ssh" / "authorized_keys"
    assert not written.is_symlink() and written.stat().st_uid == NOBODY and written.read_text() == keys.read_text()
    assert rootfile.read_text() == "root's\n" and rootfile.stat().st_uid == 0
    # her ~/.ssh swapped for a link to a folder of root's: as her, the kernel refuses (root's folder untouched)
    rootssh = tmp_path / "rootssh"
    rootssh.mkdir(mode=0o700)
    shutil.rmtree(home / ".ssh")
    (home / ".ssh").symlink_to(rootssh)
    os.lchown(home / ".ssh", NOBODY, NOBODY)
    done = copy(keys, f"{home}/.ssh/authorized_keys")
    assert done.returncode == 1 and list(rootssh.iterdir()) == [], done.stdout + done.stderr
    unprivileged = copy(keys, f"{home}/notes", become=False)  # only root can act as her
    assert unprivileged.returncode == 1 and "with --become it is written as that folder's owner" in unprivileged.stderr


@root_only
def test_refused_below_a_folder_anyone_can_write(tmp_path, keys):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    done = copy(keys, f"{shared}/x")
    assert done.returncode == 1 and not (shared / "x").exists()
    assert done.stderr.strip() == (
        f"refused: {shared}/x is below {shared}, a folder another user can write (owner root, mode 777)"
    )


@root_only
def test_in_a_sticky_folder_only_an_absent_or_own_name_is_written(tmp_path, keys):
    sticky = tmp_path / "scratch"
    sticky.mkdir()
    sticky.chmod(0o1777)
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (sticky / "x.provision~").symlink_to(victim)  # planted where the backup goes
    os.lchown(sticky / "x.provision~", NOBODY, NOBODY)
    assert copy(keys, f"{sticky}/x").returncode == 0
    keys.write_text("ssh-ed25519 BBBB alice\n")
    again = copy(keys, f"{sticky}/x")
    assert again.returncode == 0, again.stderr
    assert victim.read_text() == "keep\n" and not (sticky / "x.provision~").is_symlink()
    assert (sticky / "x.provision~").read_text() == "ssh-ed25519 AAAA alice\n"
    theirs = sticky / "theirs"
    theirs.write_text("nobody's\n")
    os.chown(theirs, NOBODY, NOBODY)
    refused = copy(keys, f"{sticky}/theirs")
    assert refused.returncode == 1 and "is not the writer's own" in refused.stderr and theirs.read_text() == "nobody's\n"


def test_an_identical_copy_is_unchanged_and_leaves_no_backup(tmp_path, keys):
    """Issue 34, item 7: the same bytes (and mode) there already: nothing written, no backup."""
    out = tmp_path / "out"
    out.mkdir()
    assert copy(keys, f"{out}/", become=False).returncode == 0
    done = copy(keys, f"{out}/", become=False)
    assert done.returncode == 0 and done.stdout.startswith(f"unchanged: {out}/alice_keys already holds these 23 bytes")
    assert sorted(p.name for p in out.iterdir()) == ["alice_keys"]
    keys.chmod(0o644)  # the same bytes with another mode: written (the old one kept)
    assert copy(keys, f"{out}/", become=False).stdout.startswith("copied 23 bytes")
    assert sorted(p.name for p in out.iterdir()) == ["alice_keys", "alice_keys.provision~"]


def test_a_fifo_at_the_destination_is_replaced_never_waited_on(tmp_path, keys):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "alice_keys")
    done = subprocess.run(["sh", "-s"], input=copy_script(keys, f"{out}/"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and (out / "alice_keys").read_text() == keys.read_text()
    assert not (out / "alice_keys.provision~").exists()  # a FIFO is not a file to keep


def test_a_path_the_walk_cannot_finish_is_refused_never_written(tmp_path, keys):
    (tmp_path / "la").symlink_to(tmp_path / "lb")
    (tmp_path / "lb").symlink_to(tmp_path / "la")
    done = copy(keys, f"{tmp_path}/la/x", become=False)
    assert done.returncode == 1 and "could not be checked: it leads through more than 64 names" in done.stderr
