"""`provision setup-cluster` bad input: one line, exit 2, before any host is touched (the
inventory's hosts are unreachable, so touching one would give exit 1 instead)."""

import pytest

from conftest import run_cli

INVENTORY = "hosts:\n  n1: {address: 127.0.0.1, port: 1}\n  n2: {address: 127.0.0.1, port: 1}\n"


def files(tmp_path, users="    - {name: alice, uid: 2001}\n", playbook=None):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY + "vars:\n  cluster_users:\n" + users)
    args = ["setup-cluster", "-i", str(inventory), "--known-hosts", str(tmp_path / "kh")]
    if playbook is not None:
        (tmp_path / "pb.yml").write_text(playbook)
        args += ["--playbook", str(tmp_path / "pb.yml")]
    return args


@pytest.mark.parametrize(
    "users,playbook,message",
    [
        ("    - {name: alice, uid: 2001}\n    - {name: bob, uid: 2001}\n", None, "uid 2001 of bob is already the uid of alice"),
        ("    - {name: 'al$(reboot)', uid: 2001}\n", None, "user name"),
        (
            None,
            "- hosts: all\n  tasks:\n    - usr: {name: x}\n",
            "pb.yml:3: unknown operation or keyword 'usr' (operations: authorized_key",
        ),
        (
            None,
            "- hosts: all\n  tasks:\n    - user: {name: x, uid: 1, colour: red}\n",
            "unknown argument 'colour' (valid: create_home, group, groups, home, name, remove_home, shell, state, uid)",
        ),
        (None, "- hosts: all\n  tasks:\n    - directory: {path: /x}\n      when: 'a ==='\n", "pb.yml:4: when:"),
        (
            None,
            "- hosts: all\n  tasks:\n    - directory: {path: '/x/{{ nope }}'}\n",
            "pb.yml:3: task 'directory' on n1: 'nope' is undefined",
        ),
        (
            None,
            "- hosts: all\n  tasks:\n    - directory: {path: '/x/{{ bad }}'}\n  vars: {bad: '../../etc'}\n",
            "may not contain '..'",
        ),
        (None, "- hosts: all\n  tasks:\n    - [unclosed\n", "pb.yml:4: YAML syntax"),
    ],
)
def test_bad_input_exit_2_no_host_touched(tmp_path, users, playbook, message):
    args = files(tmp_path, users or "    - {name: alice, uid: 2001}\n", playbook)
    done = run_cli(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr


def test_bad_extra_var(tmp_path):
    done = run_cli(*files(tmp_path), "-e", "no-equals")
    assert done.returncode == 2 and "NAME=VALUE" in done.stderr


def test_unreachable_hosts_exit_1_with_recap(tmp_path):
    done = run_cli(*files(tmp_path), "--connect-timeout", "2")
    assert done.returncode == 1
    assert "n1 : ok=0 changed=0 unreachable=1 failed=0 skipped=0" in done.stdout
    assert "n2 : ok=0 changed=0 unreachable=1 failed=0 skipped=0" in done.stdout


def test_help_has_an_example():
    done = run_cli("setup-cluster", "--help")
    assert done.returncode == 0 and "provision setup-cluster -i inventory/hosts.yml --check --diff" in done.stdout
