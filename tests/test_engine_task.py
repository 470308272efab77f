"""A task's life (provision.engine.task): what state it needs, and as whom; pure, no host."""

from __future__ import annotations

from pathlib import Path

from provision.engine.render import names_in
from provision.engine.task import as_reader, partial_requests, reader_of, unified_diff
from provision.operations.base import StateKey, Write
from provision.operations.paths import LOGIN_USER
from provision.playbook.model import Play, Task


def task(op: str, args: dict, **keywords) -> Task:
    return Task(name="t", op=op, args=args, where="pb.yml:3", **keywords)


def play(become: bool = False) -> Play:
    return Play(name="p", hosts=("all",), where="pb.yml:1", base=Path("."), become=become)


def test_names_in_walks_dicts_and_lists():
    assert names_in({"a": "{{ x }}", "b": ["{{ y.z }}", 3], "c": "plain"}) == {"x", "y"}
    assert names_in([]) == set() and names_in(7) == set()


def test_only_command_state_is_read_as_the_tasks_user():
    keys = [StateKey("command", "test -e /x"), StateKey("file", "/x")]
    assert as_reader(keys, "alice") == [StateKey("command", "test -e /x", "alice"), StateKey("file", "/x")]
    assert as_reader(keys, "") == keys


def test_the_reader_is_become_user_root_or_the_login_user():
    assert reader_of(task("command", {}, become_user="{{ who }}"), play(), {"who": "alice"}) == "alice"
    assert reader_of(task("command", {}, become_user="{{ who }}"), play(), {"who": "a;b"}) == ""  # known per item only
    assert reader_of(task("command", {}), play(become=True), {}) == "root"
    assert reader_of(task("command", {}), play(), {}) == LOGIN_USER


def test_partly_known_arguments_still_name_the_state_they_can():
    template = task("template", {"src": "x.j2", "path": "/etc/{{ name }}"})
    assert partial_requests(template, {"name": "motd"}) == [StateKey("file", "/etc/motd")]
    assert partial_requests(template, {}) == []  # the path is not known yet
    line = task("line", {"path": "/etc/hosts", "line": "{{ hostvars.other }}"})
    assert partial_requests(line, {}) == [StateKey("file", "/etc/hosts")]
    assert partial_requests(task("no_such_op", {}), {}) == []


def test_unified_diff_new_changed_secret():
    assert "+line\n" in unified_diff(Write("/etc/x", b"line\n"))
    diff = unified_diff(Write("/etc/x", b"a\nb\n", old=b"a\n"))
    assert "--- /etc/x (before)" in diff and "+b" in diff
    assert "hidden" in unified_diff(Write("/etc/x", b"pw", secret=True))
