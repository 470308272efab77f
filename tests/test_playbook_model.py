"""Playbook loading: every error names file:line; operations and arguments are checked on load."""

import pytest

from provision.playbook.model import PlaybookError, load_playbook
from provision.resources import resource_dir


def write(tmp_path, text, name="pb.yml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_setup_cluster_playbook_loads():
    plays = load_playbook(resource_dir("playbooks") / "setup-cluster.yml")
    assert [p.hosts for p in plays][:3] == [("all",), ("all",), ("all",)]
    # issue 15: a first play with no task reads every node's state before cluster-wide decisions
    assert plays[0].tasks == () and plays[0].become
    assert [t.register for t in plays[1].tasks if t.register] == ["user_keys"] and plays[1].become
    # issue 8's roles, included after users and SSH, each selectable by its tag; issue 18's Slurm
    # role last (issue 36: its packages and files, slurmctld, slurmd; the admin's Slurm: the
    # reconfigure once every host has the files)
    assert [sorted({t for task in p.tasks for t in task.tags}) for p in plays[3:]] == [
        ["nfs"],
        ["nfs"],
        ["anaconda"],
        ["jupyter"],
        ["slurm"],
        ["slurm"],
        ["slurm"],
        ["slurm"],
    ]


BAD = [
    ("- hosts: all\n  tasks:\n    - name: x\n      dirctory: {path: /x}\n", ":4:", "unknown operation or keyword 'dirctory'"),
    (
        "- hosts: all\n  tasks:\n    - directory: {path: /x, colour: red}\n",
        ":3:",
        "unknown argument 'colour' (valid: group, mode, owner, path)",
    ),
    ("- hosts: all\n  tasks:\n    - file: {path: /x}\n", ":3:", "missing argument 'content'"),
    ("- hosts: all\n  tasks:\n    - directory: {path: /x}\n      when: 'a ==== b'\n", ":4:", "does not parse"),
    ("- hosts: all\n  tasks:\n    - directory: {path: /x}\n      notify: nobody\n", ":3:", "no handler named 'nobody'"),
    ("- hosts: all\n  name: a: b\n", ":2:", "YAML syntax"),
    ("- hosts: all\n  taks: []\n", ":2:", "unknown play keyword 'taks'"),
    ("- tasks: []\n", ":1:", "needs hosts"),
    ("- include: missing.yml\n", ":1:", "not found"),
    ("- hosts: all\n  tasks:\n    - directory: {path: /x}\n      register: 'a b'\n", ":4:", "not a variable name"),
    ("- hosts: all\n  tasks:\n    - directory: {path: /x}\n      file: {path: /y, content: z}\n", ":3:", "exactly one operation"),
]


@pytest.mark.parametrize("text,line,message", BAD)
def test_errors_name_file_and_line(tmp_path, text, line, message):
    with pytest.raises(PlaybookError) as caught:
        load_playbook(write(tmp_path, text))
    assert f"pb.yml{line}" in str(caught.value) and message in str(caught.value)


def test_include_with_tags_and_nesting(tmp_path):
    write(tmp_path, "- hosts: g1\n  tasks:\n    - directory: {path: /a}\n      tags: [t1]\n", "inner.yml")
    outer = write(tmp_path, "- include: inner.yml\n  tags: [outer]\n- hosts: all\n  tasks:\n    - directory: {path: /b}\n")
    plays = load_playbook(outer)
    assert plays[0].tasks[0].tags == ("outer", "t1") and plays[0].hosts == ("g1",)
    assert plays[1].tasks[0].where.endswith("pb.yml:5")


def test_include_loop_is_refused(tmp_path):
    path = write(tmp_path, "- include: pb.yml\n")
    with pytest.raises(PlaybookError, match="nested deeper"):
        load_playbook(path)


def test_template_task_arguments(tmp_path):
    path = write(tmp_path, "- hosts: all\n  tasks:\n    - template: {src: a.j2, path: /etc/a, mode: '0600'}\n")
    assert load_playbook(path)[0].tasks[0].op == "template"
