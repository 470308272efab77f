"""provision.operations.base.check_path: no character that a reader cannot see, or that changes
what she reads, reaches a node's file names (issue 33 finding 6: C1 and bidi controls passed)."""

from __future__ import annotations

import pytest

from conftest import run_cli
from provision.errors import ArgumentError
from provision.operations.base import check_path


@pytest.mark.parametrize(
    "path,shown",
    [
        ("/etc/a\nb", "'/etc/a\\x0ab'"),
        ("/etc/a\tb", "'/etc/a\\x09b'"),
        ("/etc/a\x7fb", "'/etc/a\\x7fb'"),
        ("/etc/a\x85b", "'/etc/a\\x85b'"),  # C1 NEL: a line break to some terminals
        ("/etc/a\x9bb", "'/etc/a\\x9bb'"),  # C1 CSI: an escape sequence's start
        ("/home/alice/\u202etxt.sh", "'/home/alice/\\u202etxt.sh'"),  # right-to-left override: reads "hs.txt"
        ("/etc/cron.d/\u2066x\u2069", "'/etc/cron.d/\\u2066x\\u2069'"),  # bidi isolates
        ("/etc/pass\u200bwd", "'/etc/pass\\u200bwd'"),  # zero-width space: looks like /etc/passwd
        ("~alice/a\u2028b", "'~alice/a\\u2028b'"),  # line separator
        ("/etc/\ufeffx", "'/etc/\\ufeffx'"),
        ("/etc/a\xa0b", None),  # no-break space: looks like a space
        ("/etc/a\udc85", None),  # an undecodable byte of the command line (surrogateescape)
    ],
)
def test_invisible_and_control_characters_are_refused(path, shown):
    with pytest.raises(ArgumentError) as caught:
        check_path(path)
    message = str(caught.value)
    assert "holds control or invisible characters" in message and "\n" not in message
    if shown:
        assert message.startswith(f"path {shown} ")


@pytest.mark.parametrize("path", ["/data/imagenet", "/data/데이터/train 1", "~alice/.ssh/authorized_keys", "/opt/conda-3.1+x"])
def test_printable_paths_pass(path):
    assert check_path(path) == path


@pytest.mark.parametrize("dest", ["/tmp/a\nb", "/tmp/a\u0085b", "/tmp/\u202etxt.sh", "/tmp/a\udc85"])
def test_run_copy_dest_with_a_control_character_is_one_line_and_exit_2(tmp_path, dest):
    source = tmp_path / "f"
    source.write_text("x\n")
    done = run_cli("run", "localhost", "--copy", str(source), "--dest", dest)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("provision: error: --dest: path '/tmp/"), done.stderr
