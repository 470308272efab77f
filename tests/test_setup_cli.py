"""`provision setup-cluster` bad input: one line, exit 2, before any host is touched (the
inventory's hosts are unreachable, so touching one would give exit 1 instead)."""

import json

import pytest

from conftest import run_cli
from provision.playbook.model import load_playbook
from provision.resources import resource_dir

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


def layout(tmp_path, files=None, hosts=("w1", "w2", "w3")):
    """Unreachable hosts w1..w3 (gpu: w1 w2; racks rack1: w1 w2, rack2: w3) and ``files`` beside the inventory."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "hosts:\n"
        + "".join(f"  {h}: {{address: 127.0.0.1, port: 1}}\n" for h in hosts)
        + "groups:\n  gpu: [w1, w2]\nracks:\n  - {name: rack1, hosts: [w1, w2]}\n  - {name: rack2, hosts: [w3]}\n"
    )
    for name, text in (files or {}).items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return ["setup-cluster", "-i", str(inventory), "--known-hosts", str(tmp_path / "kh"), "--connect-timeout", "2"]


DUPLICATE_UID = "cluster_users:\n  - {name: alice, uid: 2001}\n  - {name: bob, uid: 2001}\n"


@pytest.mark.parametrize("where", ["group_vars/all.yml", "group_vars/all.yaml", "group_vars/gpu/users.yml", "host_vars/w3"])
def test_group_vars_and_host_vars_reach_the_uid_check(tmp_path, where):
    done = run_cli(*layout(tmp_path, {where: DUPLICATE_UID}))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{where} (host " in done.stderr and "uid 2001 of bob is already the uid of alice" in done.stderr


def test_same_user_with_other_uids_on_two_groups_is_refused(tmp_path):
    files = {
        "group_vars/gpu.yml": "cluster_users: [{name: alice, uid: 2001}]\n",
        "group_vars/rack2.yml": "cluster_users: [{name: alice, uid: 2002}]\n",
    }
    done = run_cli(*layout(tmp_path, files))
    assert done.returncode == 2 and "alice has uid/gid 2002/2002 here but 2001/2001 on w1" in done.stderr


def test_missing_cluster_users_and_stray_group_vars_are_warnings(tmp_path):
    done = run_cli(*layout(tmp_path, {"group_vars/gpus.yml": "x: 1\n"}), "--syntax-check")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any("warning:" in line and "group_vars/gpus.yml: no group 'gpus'" in line for line in lines), done.stderr
    assert any("warning: cluster_users is not set for w1, w2, w3" in line for line in lines), done.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tags", "userz"], "--tags userz: no task has this tag (tags: anaconda, jupyter, nfs, slurm, ssh, users;"),
        (["--skip-tags", "nsf"], "--skip-tags nsf: no task has this tag"),
        (["--limit", "w9"], "--limit 'w9' matches no host in"),
        (["--limit", "gpu:!w9"], "(groups: gpu, rack1, rack2; hosts: w1, w2, w3;"),
        (["--limit", "gpu:!gpu"], "leaves no host for the playbook's plays"),
        (["--start-at-task", "no such task"], "--start-at-task 'no such task': no task has this name (tasks: 'primary group"),
    ],
)
def test_selection_that_runs_nothing_is_refused(tmp_path, args, message):
    done = run_cli(*layout(tmp_path, {"group_vars/all.yml": "cluster_users: []\n"}), *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, done.stderr
    assert "RECAP" not in done.stdout  # no host touched


@pytest.mark.parametrize(
    "limit, hosts",
    [
        (["w1,w2"], ["w1", "w2"]),
        (["w1", "-l", "w3"], ["w1", "w3"]),
        (["gpu:!w2"], ["w1"]),
        (["w[2:3]"], ["w2", "w3"]),
        (["gpu:&rack1"], ["w1", "w2"]),
        (["rack2"], ["w3"]),
        (["w*"], ["w1", "w2", "w3"]),
        (["all:!rack1"], ["w3"]),
    ],
)
def test_limit_takes_ansible_patterns(tmp_path, limit, hosts):
    done = run_cli(*layout(tmp_path), "--list-hosts", "--limit", *limit)
    assert done.returncode == 0, done.stderr
    first_play = done.stdout.split("play #2")[0]
    assert f"hosts ({len(hosts)}):" in first_play
    assert [line.strip() for line in first_play.splitlines() if line.startswith("      ")] == hosts


def test_list_tasks_and_tags_follow_tags_and_start_at_task(tmp_path):
    done = run_cli(*layout(tmp_path), "--list-tasks", "--tags", "users", "--start-at-task", "~/.ssh of *")
    assert done.returncode == 0, done.stderr
    listed = done.stdout.split("): cluster users and their SSH keys")[1].split("  play #")[0].split("tasks:\n")[1]
    tasks = [line.split("TAGS:")[0].strip() for line in listed.splitlines() if line.strip()]
    assert tasks[:2] == ["~/.ssh of each cluster user", "ed25519 key pair of each cluster user on this node"]
    assert "primary group of each cluster user" not in done.stdout  # before the start
    tags = run_cli(*layout(tmp_path), "--list-tags")
    assert tags.returncode == 0 and "ALL TAGS: [anaconda, jupyter, nfs, slurm, ssh, users]" in tags.stdout
    assert "(all): cluster users and their SSH keys" in tags.stdout


def test_syntax_check_touches_no_host(tmp_path):
    done = run_cli(*layout(tmp_path, {"group_vars/all.yml": "cluster_users: [{name: alice, uid: 2001}]\n"}), "--syntax-check")
    assert done.returncode == 0, done.stderr
    plays = len(load_playbook(resource_dir("playbooks") / "setup-cluster.yml"))
    assert f"setup-cluster.yml: syntax OK ({plays} plays," in done.stdout and "checked for 3 hosts" in done.stdout
    assert "RECAP" not in done.stdout and "unreachable" not in done.stdout
    broken = run_cli(*layout(tmp_path, {"group_vars/all.yml": "cluster_users: [{name: 'a;b', uid: 2001}]\n"}), "--syntax-check")
    assert broken.returncode == 2 and "group_vars/all.yml (host w1): cluster_users[0]: user name" in broken.stderr


def test_recap_of_many_hosts_folds_hosts_alike(tmp_path):
    """Issue 37: above a screenful of hosts, one recap line per group of hosts with the same counts
    and message (the failed first), not a line per host; every host stays in --json."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "hosts:\n"
        + "".join(f"  n{i:02d}: {{address: 127.0.0.1, port: 1}}\n" for i in range(1, 41))
        + "vars:\n  cluster_users: []\n"
    )
    args = ["setup-cluster", "-i", str(inventory), "--known-hosts", str(tmp_path / "kh"), "--tags", "users"]
    done = run_cli(*args)
    assert done.returncode == 1
    recap = done.stdout.split("RECAP\n", 1)[1].splitlines()
    assert recap[0] == "n[01-40] (40 hosts) : ok=0 changed=0 unreachable=1 failed=0 skipped=0", done.stdout
    assert recap[1].startswith("  unreachable: ") and "<host>" not in recap[1] and len(recap) == 2, recap
    as_json = run_cli(*args, "--json")
    assert len(json.loads(as_json.stdout)["recap"]) == 40


def test_recap_groups_put_failures_first_and_read_each_host_as_host():
    from provision.cli.setup_view import recap_groups
    from provision.engine.recap import Recap

    recaps = [Recap(f"w{i:03d}", ok=8) for i in range(1, 98)]
    recaps += [Recap(h, unreachable=1, message=f"timeout: {h} gave no SSH answer within 10s") for h in ("w098", "w099")]
    recaps.append(Recap("w100", ok=8, changed=1))
    lines = [(r.host, r.line(), r.message) for r in recap_groups(recaps)]
    assert lines == [
        (
            "w[098-099] (2 hosts)",
            "w[098-099] (2 hosts) : ok=0 changed=0 unreachable=1 failed=0 skipped=0",
            "timeout: <host> gave no SSH answer within 10s",
        ),
        ("w[001-097] (97 hosts)", "w[001-097] (97 hosts) : ok=8 changed=0 unreachable=0 failed=0 skipped=0", ""),
        ("w100", "w100 : ok=8 changed=1 unreachable=0 failed=0 skipped=0", ""),
    ]
    few = recaps[:3]
    assert recap_groups(few) == few  # a screenful: each host its own line, as before


def test_live_view_of_many_hosts_is_one_line_of_counts_and_the_hosts_at_work():
    """Issue 37: the live view is drawn from the state at rich's refresh, never rebuilt per update
    (a table of every host rebuilt at each of their updates was O(hosts²): 1024 hosts did not
    finish in 300 s); above a screenful it is bounded."""
    import io

    from rich.console import Console

    from provision.cli.setup_view import HOST_ROWS, LiveView

    live = LiveView([f"h{i:04d}" for i in range(4096)], None, quiet=False)
    for i in range(4096):
        live.host(f"h{i:04d}", "reading state")
        live.host(f"h{i:04d}", "done" if i % 3 else ("stopped: timeout" if i % 2 else "cluster user with a fixed uid"))
    out = io.StringIO()
    Console(file=out, width=100).print(live)
    shown = out.getvalue().splitlines()
    assert shown[0].split() == ["4096", "hosts", "2730", "done,", "683", "stopped,", "0", "waiting,", "683", "at", "work"]
    assert len(shown) == 1 + HOST_ROWS // 2 and shown[1].split()[0] == "h0000"
    few = LiveView(["a", "b"], None, quiet=False)
    few.host("b", "done")
    out = io.StringIO()
    Console(file=out, width=100).print(few)
    assert [line.split() for line in out.getvalue().splitlines()] == [["a", "waiting"], ["b", "done"]]


@pytest.mark.parametrize("with_inventory", [False, True])
def test_the_limit_hint_is_the_command_as_typed_less_limit_and_it_runs_when_pasted(tmp_path, with_inventory):
    """Issue 34: `setup-cluster --limit nw4` (the default inventory) suggested `provision
    setup-cluster -i None`; the hint is now the typed command less --limit, pasted as it is."""
    import re
    import shlex

    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "hosts.yml").write_text(INVENTORY + "vars:\n  cluster_users: [{name: alice, uid: 2001}]\n")
    given = ["-i", "inventory/hosts.yml"] if with_inventory else []
    known = ["--known-hosts", str(tmp_path / "kh file")]
    done = run_cli(
        "setup-cluster", *given, "--limit", "n1", *known, "--tags", "users,ssh", "--connect-timeout", "2", cwd=tmp_path
    )
    assert done.returncode == 2, done.stdout + done.stderr
    hint = re.search(r"run `([^`]+)` without --limit", done.stderr)
    assert hint, done.stderr
    words = shlex.split(hint.group(1))
    expected = ["provision", "setup-cluster", *(["--inventory", "inventory/hosts.yml"] if with_inventory else [])]
    expected += ["--tags", "users,ssh", "--connect-timeout", "2", "--known-hosts", str(tmp_path / "kh file")]
    assert sorted(words) == sorted(expected) and words[:2] == ["provision", "setup-cluster"], words
    assert "None" not in done.stderr and "--limit" not in hint.group(1)
    pasted = run_cli(*words[1:], cwd=tmp_path)  # reaches the hosts (unreachable here: exit 1), no usage error
    assert pasted.returncode == 1 and "n1" in pasted.stdout and "n2" in pasted.stdout, pasted.stdout + pasted.stderr


def test_every_play_of_the_shipped_playbook_runs_on_every_host():
    """What connect_first stands on (issue 37): the shipped playbook's hosts are the inventory's
    (less --limit), known before the playbook is read."""
    plays = load_playbook(resource_dir("playbooks") / "setup-cluster.yml")
    assert len(plays) > 3 and {tuple(play.hosts) for play in plays} == {("all",)}


@pytest.mark.parametrize(
    "extra,early,said",
    [
        ([], ["n1", "n2"], "unreachable"),  # port 1: then unreachable, as before
        (["--forks", "1"], ["n1"], "unreachable"),
        (["--limit", "n2"], ["n2"], "without --limit"),  # refused after the handshakes began: they are abandoned
        (["--tags", "userz"], ["n1", "n2"], "userz"),  # refused by the selection, the first check after them
    ],
)
def test_the_shipped_playbook_connects_before_it_is_read(tmp_path, monkeypatch, extra, early, said):
    """Issue 37: with the shipped playbook, the handshakes of the hosts its run reaches first
    start before the playbook is read and checked (they overlap that work); a playbook of the
    user's own is read first, its hosts are its plays'. No command runs before the run."""
    import provision.cluster_setup as cluster_setup
    from conftest import run_in_process
    from provision.transport.session import Session

    started, seen_when_read, abandoned = [], [], []
    load = cluster_setup.load_playbook
    monkeypatch.setattr(Session, "open_ahead", lambda self: started.append(self.host.name))
    monkeypatch.setattr(Session, "abandon", lambda self, wait=0.0: abandoned.append(self.host.name))
    monkeypatch.setattr(cluster_setup, "load_playbook", lambda path: (seen_when_read.append(list(started)), load(path))[1])
    done = run_in_process(*files(tmp_path), "--check", *extra)
    refused = said != "unreachable"
    assert seen_when_read == [early] and done.returncode == (2 if refused else 1)
    assert said in done.stdout + done.stderr
    assert sorted(abandoned) == (early if refused else []), abandoned
    started.clear(), seen_when_read.clear()
    own = "- hosts: n2\n  tasks:\n    - {name: t, command: {cmd: 'true'}}\n"
    run_in_process(*files(tmp_path, playbook=own), "--check")
    assert seen_when_read == [[]] and started == ["n2"]
    started.clear(), seen_when_read.clear()  # a key learned would be written: not before the checks
    run_in_process(*files(tmp_path), "--check", "--accept-new-host-keys")
    assert seen_when_read == [[]] and started == []
