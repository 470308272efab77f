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
