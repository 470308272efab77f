"""provision.operations.paths: the walk of the folders above every path, run by a real local sh
(dash when there is one, as Debian's /bin/sh) on trees that another user (``nobody``) owns in part."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from provision.operations.paths import WALK_LIB, path_command, walk_prelude

SH = shutil.which("dash") or "sh"
NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give folders to another user")


def verdicts(paths: list[str], env: dict | None = None) -> list[str]:
    """``V_<n>`` of each path, walked as root in one round trip's prelude."""
    show = "".join(f'printf "%s\\0" "$V_{n}";' for n in range(len(paths)))
    script = walk_prelude([(n, path, "") for n, path in enumerate(paths)], True) + show
    done = subprocess.run([SH, "-c", script], capture_output=True, text=True, env=env, check=True)
    return done.stdout.split("\0")[:-1]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tree as root builds it, with folders nobody (another user) owns or anyone can write."""
    os.chmod(tmp_path, 0o755)
    for folder in ("safe/sub", "theirs/sub", "sticky/rootdir", "sticky/theirdir", "open", "group"):
        (tmp_path / folder).mkdir(parents=True)
    os.chown(tmp_path / "theirs", NOBODY, NOBODY)
    os.chown(tmp_path / "sticky/theirdir", NOBODY, NOBODY)
    os.chmod(tmp_path / "sticky", 0o1777)
    os.chmod(tmp_path / "open", 0o777)
    os.chmod(tmp_path / "group", 0o775)  # group-writable, of root's own group: the reader's (root)
    (tmp_path / "rootlink").symlink_to(tmp_path / "safe")  # root's link to root's folder
    (tmp_path / "intotheirs").symlink_to(tmp_path / "theirs/sub")  # root's link into nobody's folder
    (tmp_path / "sticky/theirlink").symlink_to("/etc")  # nobody's link, in the sticky folder
    os.lchown(tmp_path / "sticky/theirlink", NOBODY, NOBODY)
    (tmp_path / "nested").symlink_to(tmp_path / "sticky/theirlink")  # root's link through nobody's link
    (tmp_path / "safe/sub/up").symlink_to("../../safe")  # relative, with ..
    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    (tmp_path / "newline").symlink_to(str(tmp_path / "safe") + "\n")
    return tmp_path


@root_only
def test_each_folder_walked_as_the_kernel_resolves_it(tree):
    t = str(tree)
    cases = {
        f"{t}/safe/sub/f": "",
        f"{t}/group/f": "",
        f"{t}/rootlink/sub/f": "",
        f"{t}/safe/sub/up/sub/up/sub/f": "",
        f"{t}/missing/deeper/f": "",  # made later by root, in folders only root can write
        f"{t}/sticky/rootdir/f": "",  # root's name in a sticky folder: nobody else can rename it
        f"{t}/theirs/f": f"below|755|nobody|nogroup|0\n{t}/theirs",
        f"{t}/theirs/sub/f": f"below|755|nobody|nogroup|0\n{t}/theirs",  # a root folder below hers: she can swap it
        f"{t}/intotheirs/f": f"below|755|nobody|nogroup|0\n{t}/theirs",  # root's link into her folder
        f"{t}/open/f": f"below|777|root|root|0\n{t}/open",
        f"{t}/sticky/f": f"sticky|1777|root|root|0\n{t}/sticky",  # the name itself decides (absent or root's own)
        f"{t}/sticky/theirdir/f": f"below|1777|root|root|0\n{t}/sticky",  # nobody's name: she may rename it
        f"{t}/nested/passwd": f"below|1777|root|root|0\n{t}/sticky",  # resolved to /etc, through her link
        f"{t}/sticky/missing/f": f"below|1777|root|root|0\n{t}/sticky",  # she could make "missing" first
        f"{t}/open/missing/f": f"below|777|root|root|0\n{t}/open",
        f"{t}/loop/f": f"changing|0|long|?|0\n{t}/loop",  # a loop: more names than a walk takes
        f"{t}/newline/f": f"changing|0|links|?|0\n{t}/newline",  # a link's text with a newline
    }
    nogroup = subprocess.run(["id", "-gn", "nobody"], capture_output=True, text=True).stdout.strip()
    expected = [value.replace("nogroup", nogroup) for value in cases.values()]
    assert verdicts(list(cases)) == expected


@root_only
def test_the_reader_is_the_user_a_home_path_is_read_as(tree):
    """A ``~user`` path is read as that user: her own folders are as safe for her as root's."""
    t = str(tree)
    os.chown(tree / "theirs/sub", NOBODY, NOBODY)
    walk = "".join(f'_pw {t}/{path} {NOBODY} {NOBODY}; printf "%s|" "$V";' for path in ("theirs/sub/f", "safe/f", "open/f"))
    done = subprocess.run([SH, "-c", WALK_LIB + walk], capture_output=True, text=True, check=True)
    assert done.stdout == f"||below|777|root|root|0\n{t}/open|"


@root_only
def test_one_stat_for_every_folder_of_every_path(tree, tmp_path_factory):
    """Issue 37's constraint: the walk costs one stat process for the whole round trip, not one
    per folder; only a link on the way costs a readlink (and a stat of where it leads)."""
    shims = tmp_path_factory.mktemp("shims")
    log = shims / "log"
    for tool in ("stat", "readlink"):
        real = shutil.which(tool)
        (shims / tool).write_text(f'#!/bin/sh\necho {tool} >>{log}\nexec {real} "$@"\n')
        (shims / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}"}
    t = str(tree)
    plain = [f"{t}/safe/sub/f{n}" for n in range(12)] + [f"{t}/group/x", f"{t}/sticky/rootdir/y", "/etc/ssh/sshd_config"]
    assert verdicts(plain, env) == [""] * len(plain)
    assert log.read_text().split() == ["stat"]
    log.unlink()
    assert verdicts([f"{t}/rootlink/sub/z", f"{t}/rootlink/sub/y"], env) == ["", ""]
    assert log.read_text().split() == ["stat", "readlink", "stat"]  # the link read once, where it leads stat-ed once


@root_only
def test_a_file_fact_in_a_sticky_folder_reads_only_the_readers_own_name(tree):
    t = str(tree)
    mine, theirs = tree / "sticky/mine", tree / "sticky/theirs"
    mine.write_text("root's\n")
    theirs.write_text("nobody's\n")
    os.chown(theirs, NOBODY, NOBODY)
    read = lambda path: subprocess.run([SH, "-c", path_command("file", path)], capture_output=True, text=True).stdout  # noqa: E731
    assert read(f"{t}/sticky/mine").splitlines()[2:] == ["own", "regular file|644|root|root|7", "=cm9vdCdzCg=="]
    assert read(f"{t}/sticky/theirs").splitlines()[2:4] == ["other", f"regular file|644|nobody|{theirs.group()}|9"]
    assert "bm9ib2R5" not in read(f"{t}/sticky/theirs")  # her content never read
    assert read(f"{t}/sticky/none").splitlines()[2:] == ["absent"]


def test_exists_counts_a_link_and_never_follows_it(tmp_path):
    """Issue 34, item 7: ``creates:`` answers as Ansible's does: ansible/ansible@030bc99a9a5f
    lib/ansible/modules/command.py skips the command ``if glob.glob(creates):``, and Python's glob
    of a plain name is ``if _lexists(_join(root_dir, pathname), dir_fd):`` (CPython 3.11
    Lib/glob.py:66): a link counts, dangling or not. The real glob is the authority here."""
    (tmp_path / "dangling").symlink_to(tmp_path / "nothing")
    (tmp_path / "python3").symlink_to("/usr/bin/env")
    (tmp_path / "file").write_text("x")
    os.chmod(tmp_path, 0o755)
    run = lambda path: subprocess.run([SH, "-c", path_command("exists", path)], capture_output=True, text=True).stdout  # noqa: E731
    for name in ("python3", "dangling", "file", "nothing"):
        path = str(tmp_path / name)
        assert run(path) == ("present\n" if glob.glob(path) else "absent\n"), name
    assert run(str(tmp_path / "dangling")) == "present\n" and run(str(tmp_path / "nothing")) == "absent\n"


def test_a_home_path_of_a_missing_user_is_absent():
    out = subprocess.run([SH, "-c", path_command("file", "~nosuchuser9/.ssh/x")], capture_output=True, text=True).stdout
    assert out == "absent\n"


def test_a_stat_that_says_nothing_refuses_never_reads_as_missing(tmp_path):
    """A name that is there but that stat did not report (an argument list too long, a stat that
    failed) is never taken for a missing folder (which would be safe to make): the path is refused."""
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "stat").write_text("#!/bin/sh\nexit 1\n")
    (shims / "stat").chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}"}
    (v,) = verdicts(["/etc/ssh/sshd_config"], env)
    assert v == "changing|0|changed|?|0\n/etc"


@root_only
def test_a_users_deep_link_costs_the_walk_a_bounded_time(tree):
    """A link of hers leading through hundreds of names (a text may hold 4095 bytes, and 40 links
    follow one another) is refused after 64 names: the walk's time is bounded (its lookups grow
    with what it caches), whatever she makes of an admin's path."""
    t = str(tree)
    deep = tree / "theirs" / "deep"
    deep.mkdir()
    os.chown(deep, NOBODY, NOBODY)
    far = "/".join(["a"] * 200)
    os.makedirs(f"{t}/safe/{far}")
    (deep / "far").symlink_to(f"{t}/safe/{far}")
    os.lchown(deep / "far", NOBODY, NOBODY)
    script = WALK_LIB + f'Q=/$NL; _pq {t}/theirs/deep/far/f; _pst; _pw {t}/theirs/deep/far/f {NOBODY} {NOBODY}; printf "%s" "$V"'
    done = subprocess.run([SH, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.startswith("changing|0|long|?|0\n")


@root_only
def test_a_fifo_or_a_shared_inode_is_never_read_nor_waited_on(tree):
    """A FIFO at the path (or swapped in after the stat) is never opened waiting for a writer;
    root's own file with another name, in a sticky folder, is not root's own name there."""
    t = str(tree)
    os.mkfifo(tree / "safe/fifo")
    out = subprocess.run([SH, "-c", path_command("file", f"{t}/safe/fifo")], capture_output=True, text=True, timeout=30)
    assert out.stdout.startswith("fifo|")
    other = tree / "safe/original"
    other.write_text("root's\n")
    os.link(other, tree / "sticky/shared")  # as a user may link a file of root's she can write
    out = subprocess.run([SH, "-c", path_command("file", f"{t}/sticky/shared")], capture_output=True, text=True).stdout
    assert out.splitlines()[2:] == ["other", "hard link|644|root|root|7"]


def grant_write(folder: Path, uid: int) -> None:
    """``setfacl -m u:UID:rwx FOLDER`` as the kernel stores it (system.posix_acl_access, version 2:
    the owner's, the named user's, the group's, the mask's and the others' entries, by tag), made
    with setxattr: no acl package is needed. ``ls -ld`` then shows ``drwxrwxr-x+``; stat's mode
    shows the mask as the group's bits (0775)."""
    import struct

    entries = [(0x01, 7, 0xFFFFFFFF), (0x02, 7, uid), (0x04, 5, 0xFFFFFFFF), (0x10, 7, 0xFFFFFFFF), (0x20, 5, 0xFFFFFFFF)]
    value = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)
    try:
        os.setxattr(folder, "system.posix_acl_access", value)
    except OSError as error:
        pytest.skip(f"no POSIX ACLs on this file system: {error.strerror}")


@root_only
def test_a_folder_an_acl_lets_another_user_write_is_a_folder_users_can_write(tree):
    """A folder of root's (0755) where an ACL gives nobody rwx (``setfacl -m u:nobody:rwx``) reads
    0775 root:root in stat's mode: the group's bits are the ACL's mask. Nobody can add a name
    there (a link to /etc), so it is a folder another user can write, as the kernel decides it,
    not as the mode bits read; the same for a user's own folder an ACL opens to another user."""
    t = str(tree)
    project = tree / "project"
    project.mkdir(mode=0o755)
    grant_write(project, NOBODY)
    assert subprocess.run(["ls", "-ld", str(project)], capture_output=True, text=True).stdout[10] == "+"
    (project / "etc").symlink_to("/etc")  # as nobody would plant it
    os.lchown(project / "etc", NOBODY, NOBODY)
    expected = f"below|775|root|root|acl\n{t}/project"
    assert verdicts([f"{t}/project/etc/ssh", f"{t}/project/f", f"{t}/group/f"]) == [expected, expected, ""]
    hers = tree / "theirs" / "shared"
    hers.mkdir(mode=0o755)
    os.chown(hers, NOBODY, NOBODY)
    grant_write(hers, NOBODY - 1)  # her folder, opened to another user (uid 65533)
    walk = f'_pw {t}/theirs/shared/f {NOBODY} {NOBODY}; printf "%s" "$V"'
    done = subprocess.run([SH, "-c", WALK_LIB + walk], capture_output=True, text=True, check=True)
    assert done.stdout == f"below|775|nobody|{hers.group()}|acl\n{t}/theirs/shared"
