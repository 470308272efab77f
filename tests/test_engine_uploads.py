"""Uploads a round trip's changes need (issue 15): the distinct files of the steps, sent into a
new private folder named by their sha256, and the folder removed when sending fails. On
``localhost`` (no SSH) the session copies; over SSH it streams with SFTP (tests/test_long_steps_cluster.py)."""

import hashlib
import os

import pytest

from provision.engine.script import Step
from provision.engine.uploads import send_uploads, uploads_of
from provision.inventory.model import Host
from provision.operations.base import Run, Upload, Write
from provision.transport.options import HostFailure, SshOptions
from provision.transport.session import Session


def upload(path, data: bytes) -> Upload:
    path.write_bytes(data)
    return Upload(str(path), hashlib.sha256(data).hexdigest(), len(data))


def test_distinct_uploads_in_order(tmp_path):
    a, b = upload(tmp_path / "a", b"a"), upload(tmp_path / "b", b"b")
    steps = [Step(Run("x", "x", uploads=(a, b)), True), Step(Write("/etc/x", b""), True), Step(Run("y", "y", uploads=(a,)), True)]
    assert uploads_of(steps) == [a, b]
    assert send_uploads(None, [Step(Run("x", "x"), True)]) is None  # nothing to send: no folder, no session use


def test_sent_into_a_private_folder_by_sha256(tmp_path, monkeypatch):
    import provision.engine.uploads as uploads

    monkeypatch.setattr(uploads, "UPLOAD_PARENT", str(tmp_path))
    a = upload(tmp_path / "a", b"installer" * 1000)
    session = Session(Host("localhost"), SshOptions())
    folder = send_uploads(session, [Step(Run("x", "x", uploads=(a,)), True)])
    assert os.path.basename(folder).startswith("provision-upload.") and os.stat(folder).st_mode & 0o777 == 0o700
    assert (tmp_path / folder / a.sha256).read_bytes() == b"installer" * 1000
    assert os.stat(os.path.join(folder, a.sha256)).st_mode & 0o777 == 0o600
    session.remove_private_dir(folder)
    assert not os.path.exists(folder)


def test_a_file_changed_since_its_check_fails_and_leaves_nothing(tmp_path, monkeypatch):
    import provision.engine.uploads as uploads

    monkeypatch.setattr(uploads, "UPLOAD_PARENT", str(tmp_path / "parent"))
    (tmp_path / "parent").mkdir()
    a = upload(tmp_path / "a", b"checked")
    (tmp_path / "a").write_bytes(b"swapped")
    with pytest.raises(HostFailure, match="changed since it was checked"):
        send_uploads(Session(Host("localhost"), SshOptions()), [Step(Run("x", "x", uploads=(a,)), True)])
    assert os.listdir(tmp_path / "parent") == []
