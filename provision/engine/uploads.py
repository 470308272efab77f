"""Controller files a round trip's changes need (:class:`provision.operations.base.Upload`), sent
before it over SFTP, streamed (never inside the script, never a whole copy per host in memory):
into a new private folder (0700, the login user's; root's when the login is root) in
``/var/tmp``, each file named by its sha256. The change that uses a file checks that sha256 on
the node, as root, after linking (or copying) it into its own root-owned folder; the upload folder is removed
after the round trip whatever happened."""

from __future__ import annotations

from provision.engine.script import Step
from provision.operations.base import Run, Upload

UPLOAD_PARENT = "/var/tmp"


def uploads_of(steps: list[Step]) -> list[Upload]:
    """The distinct files the steps' changes need, in order."""
    seen: dict[str, Upload] = {}
    for step in steps:
        if isinstance(step.change, Run):
            for upload in step.change.uploads:
                seen.setdefault(upload.sha256, upload)
    return list(seen.values())


def send_uploads(session, steps: list[Step]) -> str | None:
    """Send the steps' files; the folder they are in (None when there are none). Raises
    :class:`provision.transport.connection.HostFailure` (the folder is removed first)."""
    uploads = uploads_of(steps)
    if not uploads:
        return None
    folder = session.make_private_dir(UPLOAD_PARENT)
    try:
        for upload in uploads:
            session.put_file(upload.local, f"{folder}/{upload.sha256}", upload.sha256)
    except BaseException:
        session.remove_private_dir(folder)
        raise
    return folder
