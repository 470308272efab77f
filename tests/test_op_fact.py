"""The ``fact`` operation in a real setup-cluster run (the engine's round trip on this machine): a
probe fact and a fact of one thing read by name and registered for the next task. Its arguments
and refusals are data cases (tests/operations/fact/)."""

from __future__ import annotations

import os

from test_engine_runner import make, recap

PLAYBOOK = """
- name: read facts by name
  hosts: all
  tasks:
    - name: the machine, as probe reads it
      fact: {name: uname-m}
      register: machine
    - name: a file's state
      fact: {name: file, arg: "{{ root }}/given"}
      register: given
    - name: both written by the next task
      file: {path: "{{ root }}/seen", content: "{{ machine.value }} {{ given.value.content }} {{ given.value.mode }}\\n"}
"""


def test_a_fact_is_read_by_name_in_a_run_and_registered(tmp_path):
    (tmp_path / "h1").mkdir()
    (tmp_path / "h1" / "given").write_text("hello")
    os.chmod(tmp_path / "h1" / "given", 0o640)
    report = make(tmp_path, PLAYBOOK, hosts=("h1",)).run()
    assert recap(report) == {"h1": (3, 1, 0, 0, 0)}  # only the last task changes anything
    assert (tmp_path / "h1" / "seen").read_text() == f"{os.uname().machine} hello {0o640}\n"
    again = make(tmp_path, PLAYBOOK, hosts=("h1",)).run()
    assert recap(again) == {"h1": (3, 0, 0, 0, 0)} and again.recap[0].round_trips == 1
