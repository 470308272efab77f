"""Atomic writes with backup."""

import os

from provision.files import write_atomic


def test_new_file_then_backup_on_change(tmp_path):
    path = tmp_path / "sub" / "out.rf"
    assert write_atomic(path, "one\n") is None
    assert write_atomic(path, "one\n") is None  # unchanged: no backup churn
    backup = write_atomic(path, "two\n")
    assert backup == tmp_path / "sub" / "out.rf~"
    assert backup.read_text() == "one\n" and path.read_text() == "two\n"
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]


def test_mode_is_kept(tmp_path):
    path = tmp_path / "script"
    path.write_text("a")
    os.chmod(path, 0o750)
    write_atomic(path, "b")
    assert (path.stat().st_mode & 0o777) == 0o750


# Issue 24 finding 2, and issue 28 item 2: never through a link, one sync per batch, never half written.

import pytest  # noqa: E402

from provision import files  # noqa: E402
from provision.errors import UnsafeFileError  # noqa: E402


def test_a_planted_link_for_the_backup_is_replaced_never_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    out = tmp_path / "rankfile"
    out.write_text("old\n")
    (tmp_path / "rankfile~").symlink_to(victim)
    assert write_atomic(out, "new\n") == tmp_path / "rankfile~"
    assert victim.read_text() == "root's file\n"
    assert not (tmp_path / "rankfile~").is_symlink() and (tmp_path / "rankfile~").read_text() == "old\n"


def test_an_output_path_that_is_a_link_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    (tmp_path / "rankfile").symlink_to(victim)
    with pytest.raises(UnsafeFileError, match="rankfile: is a link"):
        write_atomic(tmp_path / "rankfile", "new\n")
    assert victim.read_text() == "root's file\n" and not list(tmp_path.glob(".rankfile*"))


def test_read_regular_refuses_links_fifos_devices_and_oversized_files(tmp_path):
    (tmp_path / "link").symlink_to("/etc/passwd")
    os.mkfifo(tmp_path / "fifo")  # an open without O_NONBLOCK would block here for ever
    (tmp_path / "zero").symlink_to("/dev/zero")
    with open(tmp_path / "sparse", "wb") as handle:
        handle.truncate(files.READ_LIMIT + 1)  # sparse: nothing is written, st_size says the size
    with pytest.raises(UnsafeFileError, match="link: is a link"):
        files.read_regular(tmp_path / "link")
    with pytest.raises(UnsafeFileError, match="fifo: is a FIFO"):
        files.read_regular(tmp_path / "fifo")
    with pytest.raises(UnsafeFileError, match="is a link"):
        files.read_regular(tmp_path / "zero")
    with pytest.raises(UnsafeFileError, match="sparse: more than the 65536 KiB"):
        files.read_regular(tmp_path / "sparse")
    with pytest.raises(UnsafeFileError, match="owned by uid"):
        files.read_regular(tmp_path / "sparse", owners=(os.geteuid() + 1,))


def test_private_dir_refuses_a_link_another_users_folder_and_a_writable_one(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(elsewhere)
    with pytest.raises(UnsafeFileError, match="link: is a link"):
        files.private_dir(tmp_path / "link")
    (tmp_path / "open").mkdir()
    os.chmod(tmp_path / "open", 0o777)
    with pytest.raises(UnsafeFileError, match="writable by its group and others"):
        files.private_dir(tmp_path / "open")
    if os.geteuid() == 0:  # chown needs root (the suite runs as root in CI)
        (tmp_path / "alices").mkdir(mode=0o700)
        os.chown(tmp_path / "alices", 65534, 65534)
        with pytest.raises(UnsafeFileError, match="owned by uid 65534, not by you"):
            files.private_dir(tmp_path / "alices")
    fd = files.private_dir(tmp_path / "new" / "facts", mode=0o700)
    os.close(fd)
    assert (tmp_path / "new" / "facts").stat().st_mode & 0o777 == 0o700


def test_a_batch_costs_two_syncs_and_no_fsync_per_file(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(files, "_syncfs", lambda fd: calls.append("syncfs") or True)  # one filesystem here
    monkeypatch.setattr(files.os, "fsync", lambda fd: calls.append("fsync"))
    fd = files.private_dir(tmp_path / "facts")
    with files.StagedFiles() as staged:
        staged.keep_open(fd)
        for index in range(50):  # above _FSYNC_AT_MOST
            staged.add(fd, f"{index}.txt", b"x")
    assert calls == ["syncfs", "syncfs"] and len(list((tmp_path / "facts").iterdir())) == 50


def test_a_crash_during_the_renames_leaves_each_file_whole_old_or_new(tmp_path, monkeypatch):
    folder = tmp_path / "facts"
    folder.mkdir(mode=0o700)
    for name in "abc":
        (folder / name).write_text(f"old {name}\n")
    real_replace, done = os.replace, []

    def crash_on_the_second(*args, **kwargs):
        if len(done) == 1:
            raise KeyboardInterrupt  # the process is stopped between two renames
        done.append(args)
        return real_replace(*args, **kwargs)

    monkeypatch.setattr(files.os, "replace", crash_on_the_second)
    fd = files.private_dir(folder)
    with pytest.raises(KeyboardInterrupt), files.StagedFiles() as staged:
        staged.keep_open(fd)
        for name in "abc":
            staged.add(fd, name, f"new {name}, much longer than before\n".encode())
    contents = {path.name: path.read_text() for path in folder.iterdir()}
    assert contents == {"a": "new a, much longer than before\n", "b": "old b\n", "c": "old c\n"}  # no temporary file left


def test_syncfs_is_real_here():
    fd = os.open(".", os.O_RDONLY)
    try:
        assert files._syncfs(fd) is True  # Linux with glibc: one syncfs(2), not an fsync per file
    finally:
        os.close(fd)
