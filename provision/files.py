"""Writing files so that nothing a user had is lost: atomic replace, one backup."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str, *, backup: bool = True) -> Path | None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, then rename).

    When ``backup`` is true and ``path`` already exists with different content, the old
    file is kept as ``path~`` first. Returns the backup's path, or None when none was made.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    backup_path = None
    if backup and path.exists():
        if path.read_text(errors="replace") == text:
            return None  # unchanged: no write, no backup churn
        backup_path = path.with_name(path.name + "~")
        shutil.copy2(path, backup_path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():  # keep the mode the user gave the file
            os.chmod(tmp_name, path.stat().st_mode & 0o7777)
        else:
            os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, path)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise
    return backup_path
