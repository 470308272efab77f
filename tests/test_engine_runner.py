"""The engine on several "hosts" that run locally (each in its own folder): idempotence, one
round trip when converged, --check, a failing host alone, handlers, register, bad input first."""

from dataclasses import replace

import pytest

from provision.engine.recap import RunReport
from provision.engine.runner import BadInput, Runner, RunOptions
from provision.inventory.model import load_inventory
from provision.playbook.model import load_playbook
from provision.playbook.variables import Variables
from provision.transport.options import SshOptions
from provision.transport.session import Session


class LocalSession(Session):
    """Every host runs its commands on this machine (the hosts differ by their folder)."""

    def run(self, command, stdin=None, timeout=None):
        self.round_trips += 1
        data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        return self._run_local(command, data, timeout or 30)


PLAYBOOK = """
- name: files
  hosts: all
  tasks:
    - name: folder
      directory: {path: "{{ root }}/etc", mode: "0750"}
    - name: config
      template: {src: app.conf.j2, path: "{{ root }}/etc/app.conf", mode: "0640"}
      notify: reload
    - name: hosts line
      line: {path: "{{ root }}/etc/hosts", line: "10.0.0.1 head", create: true}
      register: hosts_line
    - name: only when the line changed
      file: {path: "{{ root }}/etc/line-changed", content: "yes\\n"}
      when: hosts_line.changed
    - name: per item
      file: {path: "{{ root }}/etc/{{ item }}", content: "{{ item }}\\n"}
      loop: [one, two]
      tags: [items]
  handlers:
    - name: reload
      command: {cmd: "echo reloaded >> {{ root }}/reloads"}
"""


def make(tmp_path, playbook=PLAYBOOK, hosts=("h1", "h2"), limit=None, **options):
    (tmp_path / "templates").mkdir(exist_ok=True)
    (tmp_path / "templates" / "app.conf.j2").write_text("name={{ inventory_hostname }}\npassword={{ secret }}\n")
    (tmp_path / "pb.yml").write_text(playbook)
    lines = ["hosts:"] + [f"  {h}: {{vars: {{root: '{tmp_path / h}'}}}}" for h in hosts] + ["vars:", "  secret: hunter2"]
    (tmp_path / "hosts.yml").write_text("\n".join(lines) + "\n")
    for host in hosts:
        (tmp_path / host).mkdir(exist_ok=True)
    inventory = load_inventory(tmp_path / "hosts.yml")
    runner = Runner(
        load_playbook(tmp_path / "pb.yml"),
        inventory,
        Variables(inventory),
        SshOptions(),
        RunOptions(**options),
        limit=limit,
        session_factory=LocalSession,
    )
    runner.prepare()
    return runner


def recap(report):
    return {r.host: (r.ok, r.changed, r.failed, r.skipped, r.unreachable) for r in report.recap}


def test_converges_then_one_round_trip(tmp_path):
    first = make(tmp_path).run()
    assert recap(first) == {h: (7, 7, 0, 0, 0) for h in ("h1", "h2")}
    assert (tmp_path / "h1" / "etc" / "app.conf").read_text() == "name=h1\npassword=hunter2\n"
    assert (tmp_path / "h2" / "reloads").read_text() == "reloaded\n"
    second = make(tmp_path).run()
    assert recap(second) == {h: (5, 0, 0, 1, 0) for h in ("h1", "h2")}  # handler not notified, `when` false
    assert {r.host: r.round_trips for r in second.recap} == {"h1": 1, "h2": 1}
    assert (tmp_path / "h2" / "reloads").read_text() == "reloaded\n"


def test_check_changes_nothing_and_diff_masks_secrets(tmp_path):
    report = make(tmp_path, check=True, diff=True).run()
    assert recap(report)["h1"][1] == 7
    assert list((tmp_path / "h1").iterdir()) == []
    diffs = "".join(d for r in report.results for d in r.diff)
    assert "+name=h1" in diffs and "hunter2" not in diffs and "password=********" in diffs


def test_tags_select_tasks(tmp_path):
    report = make(tmp_path, tags=frozenset({"items"})).run()
    assert {r.task for r in report.results} == {"per item"}
    assert (tmp_path / "h1" / "etc" / "one").exists() is False  # folder task not selected: write fails
    assert recap(report)["h1"][2] == 1


def test_failing_host_stops_alone(tmp_path):
    runner = make(tmp_path)
    (tmp_path / "h2" / "etc").write_text("a file where a folder belongs")
    report = runner.run()
    assert recap(report)["h1"] == (7, 7, 0, 0, 0)
    h2 = [r for r in report.results if r.host == "h2"]
    assert [r.status for r in h2] == ["failed"] and "not a folder" in h2[0].message
    assert not report.ok


def test_failed_change_keeps_earlier_ones_and_stops_later_ones(tmp_path):
    playbook = """
- hosts: all
  tasks:
    - file: {path: "{{ root }}/a", content: "a"}
    - command: {cmd: "echo boom >&2; exit 3"}
    - file: {path: "{{ root }}/b", content: "b"}
"""
    report = make(tmp_path, playbook, hosts=("h1",)).run()
    assert [r.status for r in report.results] == ["changed", "failed", "aborted"]
    assert "boom" in report.results[1].message
    assert (tmp_path / "h1" / "a").read_text() == "a" and not (tmp_path / "h1" / "b").exists()


@pytest.mark.parametrize(
    "task,message",
    [
        ('file: {path: "{{ root }}/x", content: "{{ missing_var }}"}', "'missing_var' is undefined"),
        ('template: {src: nope.j2, path: "{{ root }}/x"}', "not found"),
        ('file: {path: "{{ root }}/../etc/x", content: x}', "may not contain '..'"),
        ('user: {name: "bob; reboot", uid: 5}', "user name"),
        ('directory: {path: "{{ root }}"}\n      loop: "{{ root }}"', "loop must give a list"),
    ],
)
def test_bad_input_caught_before_any_host(tmp_path, task, message):
    playbook = f"- hosts: all\n  tasks:\n    - {task}\n"
    with pytest.raises(BadInput) as caught:
        make(tmp_path, playbook)
    assert "pb.yml:3" in str(caught.value) and message in str(caught.value)


def test_register_from_other_hosts_is_deferred_not_bad_input(tmp_path):
    playbook = """
- hosts: all
  tasks:
    - line: {path: "{{ root }}/names", line: "{{ inventory_hostname }}", create: true}
      register: mine
- hosts: all
  tasks:
    - file: {path: "{{ root }}/all", content: "{{ hostvars | registered('mine') | map(attribute='host') | join(',') }}"}
"""
    make(tmp_path, playbook).run()
    assert (tmp_path / "h2" / "all").read_text() == "h1,h2"


def test_limit(tmp_path):
    report = make(tmp_path, limit=["h2"]).run()
    assert [r.host for r in report.recap] == ["h2"] and list((tmp_path / "h1").iterdir()) == []


def test_diff_and_json_never_show_the_jupyter_hash_or_any_word_of_a_secret(tmp_path):
    import json

    from provision.operations.jupyter import hash_password

    (tmp_path / "alice.jupyter").write_text("correct horse battery staple\n")
    (tmp_path / "h1").mkdir()
    config = tmp_path / "h1" / "jupyter_server_config.py"
    old_hash = hash_password("the old password")
    config.write_text(f'c.PasswordIdentityProvider.hashed_password = "{old_hash}"\n')
    playbook = f"""
- name: secrets
  hosts: all
  tasks:
    - name: jupyter
      jupyter_config:
        user: alice
        path: "{config}"
        port: 8888
        password_file: "{tmp_path / "alice.jupyter"}"
        root_dir: "~"
        certfile: "~/.jupyter/c.crt"
        keyfile: "~/.jupyter/c.key"
    - name: app
      file: {{path: "{{{{ root }}}}/app.conf", content: "password: my secret phrase\\n"}}
"""
    report = make(tmp_path, playbook=playbook, hosts=("h1",), check=True, diff=True).run()
    shown = "".join(d for r in report.results for d in r.diff) + json.dumps([r.as_dict() for r in report.results])
    assert str(config) in shown and "password: ********" in shown
    # Issue 26: the config is shown, its hash's line masked (it was hidden whole).
    assert "-c.PasswordIdentityProvider.hashed_password = (hidden, fingerprint " in shown
    assert '+c.ServerApp.sock = "/var/lib/provision-jupyter/alice/jupyter.sock"' in shown
    for hidden in ("argon2", old_hash.split("$")[-1], "secret phrase", "phrase", "horse", "battery", "staple"):
        assert hidden not in shown, hidden


STALE = """
- name: facts true at each task's turn
  hosts: all
  tasks:
    - name: rewrite the file
      file: {path: "{{ root }}/x", content: "marker\\n"}
    - name: append unless the marker is there
      command: {cmd: "echo again >> {{ root }}/ran", unless: "grep -q marker {{ root }}/x"}
    - name: a command that may change anything
      command: {cmd: "echo more >> {{ root }}/existing"}
    - name: a line in a file that existed before the run
      line: {path: "{{ root }}/existing", line: "wanted", create: false}
"""


def test_a_fact_is_read_again_after_a_change_it_does_not_state(tmp_path):
    make(tmp_path, STALE, hosts=("h1",))  # the folders
    (tmp_path / "h1" / "x").write_text("old\n")
    (tmp_path / "h1" / "existing").write_text("first\n")
    first = make(tmp_path, STALE, hosts=("h1",)).run()
    assert recap(first)["h1"] == (4, 3, 0, 0, 0)
    assert not (tmp_path / "h1" / "ran").exists()  # `unless` saw the file the task before wrote


def test_check_predicts_unknown_facts_and_matches_the_real_run(tmp_path):
    make(tmp_path, STALE, hosts=("h1",))
    (tmp_path / "h1" / "x").write_text("old\n")
    (tmp_path / "h1" / "existing").write_text("first\n")
    checked = make(tmp_path, STALE, hosts=("h1",), check=True).run()
    assert recap(checked)["h1"][2] == 0  # the line task does not fail: its file is unknown, not absent
    sure = {r.task: r.status for r in checked.results if "predicted" not in r.message + r.detail}
    unsure = {r.task for r in checked.results if "predicted" in r.message + r.detail}
    # `unless` reads a file an earlier task writes, the line's file an earlier command may change:
    # neither can be known without applying, and both say so.
    assert unsure == {"append unless the marker is there", "a line in a file that existed before the run"}
    real = make(tmp_path, STALE, hosts=("h1",)).run()
    assert {r.task: r.status for r in real.results if r.task in sure} == sure


def test_live_results_come_once_final_and_agree_with_the_recap(tmp_path):
    playbook = """
- name: p
  hosts: all
  tasks:
    - {name: planned then fails, command: {cmd: "exit 3"}}
    - {name: never applied, file: {path: "{{ root }}/y", content: "y"}}
"""
    runner = make(tmp_path, playbook, hosts=("h1", "h2"))
    seen = []
    runner.on_result = seen.append
    report = runner.run()
    assert sorted((r.host, r.task, r.status) for r in seen) == sorted((r.host, r.task, r.status) for r in report.results)
    assert sorted((r.host, r.status) for r in seen if r.status in ("changed", "failed")) == [("h1", "failed"), ("h2", "failed")]
    assert all(r.failed == 1 and r.changed == 0 for r in report.recap)
    assert not (tmp_path / "h1" / "y").exists()


def test_an_error_reading_one_host_fails_that_host_only(tmp_path, monkeypatch):
    from provision.operations import state

    real = state.parse_state

    def broken(key, text):  # a parser bug on one host's output must not stop the run
        if key.kind == "file" and "/h1/" in key.arg:
            raise ValueError("invalid literal for int() with base 10: '²'")
        return real(key, text)

    monkeypatch.setattr("provision.engine.hostrun.parse_state", broken)
    report = make(tmp_path).run()
    assert recap(report)["h1"][2] == 1 and recap(report)["h2"] == (7, 7, 0, 0, 0)
    assert "h1" in report.runs and "²" in report.runs["h1"].error


def test_unless_runs_as_the_tasks_user(tmp_path):
    from provision.engine.script import build_script
    from provision.operations.base import StateKey
    from provision.operations.paths import LOGIN_USER

    script = build_script([], [StateKey("command", "id -u", "alice"), StateKey("command", "id -u", LOGIN_USER)], "n", True)
    assert script.count("runuser -u alice -- sh -s <<'PROVISION_n_batch0'\n") == 1
    assert script.count("runuser -u \"$SUDO_USER\" -- sh -s <<'PROVISION_n_batch1'\n") == 1
    assert script.count("( id -u") == 2


def test_no_log_hides_changes_diffs_and_failure_output(tmp_path):
    playbook = """
- hosts: all
  tasks:
    - file: {path: "{{ root }}/token", content: "token=s3cr3t-value"}
      no_log: true
    - command: {cmd: "echo leaked-s3cr3t-value >&2; exit 3"}
      no_log: true
"""
    report = make(tmp_path, playbook, hosts=("h1",), diff=True).run()
    wrote, failed = report.results
    assert wrote.status == "changed" and wrote.changes == ["(no_log)"] and wrote.diff == ["(no_log)"]
    assert failed.status == "failed" and failed.message == "(no_log)" and failed.changes == ["(no_log)"]
    shown = repr([r.as_dict() for r in report.results]) + repr([r.message for r in report.recap])
    assert "s3cr3t" not in shown and "token=" not in shown


def test_no_log_hides_the_loop_item(tmp_path):
    # A loop over secrets is what no_log is for: the item is neither in --json nor in the live line.
    playbook = """
- hosts: all
  tasks:
    - command: {cmd: "true"}
      loop: [{name: db, password: s3cr3t-item}, plain-s3cr3t]
      no_log: true
    - command: {cmd: "true"}
      loop: [{name: alice, uid: 2001}]
"""
    report = make(tmp_path, playbook, hosts=("h1",)).run()
    hidden = [r for r in report.results if r.no_log]
    assert len(hidden) == 2 and all(r.as_dict()["item"] == "(no_log)" and r.item_label() == "(no_log)" for r in hidden)
    assert "s3cr3t" not in repr([r.as_dict() for r in report.results])
    shown = next(r for r in report.results if not r.no_log)
    assert shown.item_label() == "alice" and shown.as_dict()["item"] == str({"name": "alice", "uid": 2001})


def test_start_at_task_skips_the_tasks_before_it(tmp_path):
    report = make(tmp_path, start_at_task="per item").run()
    assert [r.task for r in report.results if r.host == "h1"] == ["per item", "per item"]
    with pytest.raises(BadInput, match="--start-at-task 'nope': no task has this name"):
        make(tmp_path, start_at_task="nope")


@pytest.mark.parametrize(
    "options, tasks",
    [
        ({"tags": frozenset({"all"})}, {"folder", "config", "hosts line", "only when the line changed", "per item"}),
        ({"tags": frozenset({"untagged"})}, {"folder", "config", "hosts line", "only when the line changed"}),
        ({"skip_tags": frozenset({"tagged"})}, {"folder", "config", "hosts line", "only when the line changed"}),
    ],
)
def test_special_tags(tmp_path, options, tasks):
    assert {r.task for r in make(tmp_path, **options).run().results if r.host == "h1"} - {"reload"} == tasks


def test_unknown_tag_and_limit_are_bad_input(tmp_path):
    with pytest.raises(BadInput, match=r"--tags itemz: no task has this tag \(tags: items;"):
        make(tmp_path, tags=frozenset({"itemz"}))
    with pytest.raises(BadInput, match=r"--limit 'h3' matches no host"):
        make(tmp_path, limit=["h3"])
    assert set(make(tmp_path, limit=["h*:!h2"]).hosts) == {"h1"}


def test_results_say_what_ran_and_diffs_name_the_host(tmp_path):
    playbook = """
- hosts: all
  tasks:
    - name: a file
      file: {path: "{{ root }}/a", content: "a\\n"}
    - name: says something
      command: {cmd: "echo to-stdout; echo to-stderr >&2", unless: "false"}
    - name: secret command
      command: {cmd: "echo hidden-output"}
      no_log: true
    - name: fails loudly
      command: {cmd: "seq 1 400; echo the-real-cause >&2; exit 4"}
"""
    report = make(tmp_path, playbook, hosts=("h1",), diff=True).run()
    by_task = {r.task: r for r in report.results}
    assert by_task["a file"].commands[0].startswith(f"write {tmp_path}/h1/a (2 bytes, owner root:root, mode 0644")
    assert by_task["a file"].diff[0].startswith(f"--- /dev/null\n+++ h1:{tmp_path}/h1/a\n")
    assert by_task["says something"].commands == ["echo to-stdout; echo to-stderr >&2"]
    assert by_task["says something"].output == ["to-stdout\nto-stderr"]
    assert by_task["secret command"].commands == ["(no_log)"] and by_task["secret command"].output == []
    failed = by_task["fails loudly"]
    assert failed.status == "failed" and failed.output[0].startswith("1\n2\n") and failed.output[0].endswith("the-real-cause")


IDLE = """
- name: roles
  hosts: all
  tasks:
    - name: a role's task over its unset variable
      file: {path: "{{ root }}/{{ item }}", content: "x"}
      loop: "{{ things | default([]) }}"
      tags: [things]
    - name: a role's task that does not apply here
      file: {path: "{{ root }}/skipped", content: "x"}
      when: false
      tags: [things]
    - name: a role that works
      file: {path: "{{ root }}/made", content: "x"}
      tags: [made]
"""


def test_tags_whose_tasks_did_nothing_on_any_host_are_named(tmp_path):
    runner = make(tmp_path, IDLE, tags=frozenset({"things", "made"}))
    report = runner.run()
    assert recap(report)["h1"][1] == 1 and runner.idle_tags(report) == ["things"]
    assert make(tmp_path, IDLE).idle_tags(report) == []  # no --tags: nothing was asked by name
    stopped = RunReport(results=report.results, recap=[replace(r, unreachable=1) for r in report.recap])
    assert runner.idle_tags(stopped) == []  # no host got through: nothing to say of the tags


# -- what one node reported fails that node alone (issue 24.3's leftover) -------------------------
SLURM_NODE_LINES = """
- hosts: all
  vars: {{facts_folder: "{facts}"}}
  tasks:
    - name: before
      file: {{path: "{{{{ root }}}}/before", content: "x\\n"}}
    - name: node lines
      file:
        path: "{{{{ root }}}}/nodes.conf"
        content: "{{{{ ({{}} | slurm_files(groups, facts_folder, '.', inventory_hostname)).node_lines }}}}"
    - name: after
      file: {{path: "{{{{ root }}}}/after", content: "x\\n"}}
"""
NVIDIA_SMI_FAILED = {"nvidia-smi-query": "exit 9: NVIDIA-SMI has failed because it couldn't communicate"}


@pytest.mark.parametrize(
    ("h2", "why"),
    [
        ({"hostname": "DEFAULT"}, "host h2: it reports the host name 'DEFAULT', a word slurm.conf reserves"),
        ({"hostname": "all.cluster"}, "host h2: it reports the host name 'all', a word slurm.conf reserves"),
        ({"hostname": "h1"}, "host h2: it reports the host name 'h1', which is host h1's"),
        ({"gpus": (), "unavailable": NVIDIA_SMI_FAILED}, "host h2: nvidia-smi failed (exit 9: NVIDIA-SMI has failed"),
    ],
)
@pytest.mark.parametrize("check", [False, True])
def test_a_bad_value_one_node_reported_fails_that_node_and_the_others_converge(tmp_path, h2, why, check):
    """A cluster-wide file one node's own report spoils (slurm.conf's node lines): that node is
    left out and fails at that task; the others get the file without it and go on. Before, the
    whole run was refused at preparation (BadInput) and no host was touched."""
    import dataclasses
    import json

    from plan_support import minsky

    folder = tmp_path / "facts"
    folder.mkdir()
    for name in ("h1", "h2", "h3"):
        facts = dataclasses.replace(minsky(name), **(h2 if name == "h2" else {}))
        (folder / f"{name}.json").write_text(json.dumps(facts.to_dict()))
    runner = make(tmp_path, SLURM_NODE_LINES.format(facts=folder), hosts=("h1", "h2", "h3"), check=check)
    assert runner.faults.keys() == {"h2"} and why in runner.faults["h2"]
    report = runner.run()
    assert not report.ok
    assert {h: r[:3] for h, r in recap(report).items()} == {"h1": (3, 3, 0), "h2": (1, 1, 1), "h3": (3, 3, 0)}
    failed = [r for r in report.results if r.status == "failed"]
    assert [(r.host, r.task) for r in failed] == [("h2", "node lines")]
    assert why in failed[0].message and "slurm.conf and gres.conf are written without h2" in failed[0].message
    assert "\n" not in failed[0].message
    if check:
        assert [p.name for p in tmp_path.glob("h*/*")] == []
        return
    assert (tmp_path / "h2" / "before").exists() and not (tmp_path / "h2" / "after").exists()  # earlier tasks kept
    for host in ("h1", "h3"):
        lines = (tmp_path / host / "nodes.conf").read_text().splitlines()
        assert [line.split()[0] for line in lines[1:]] == ["NodeName=h[1,3]"], lines
        assert (tmp_path / host / "after").exists()


def test_a_node_without_facts_is_still_bad_input_before_any_host(tmp_path):
    """Facts missing from the folder are the user's to fix (run probe): wrong for every host."""
    import json

    from plan_support import minsky

    folder = tmp_path / "facts"
    folder.mkdir()
    (folder / "h1.json").write_text(json.dumps(minsky("h1").to_dict()))
    with pytest.raises(BadInput, match=r"no facts for host h2"):
        make(tmp_path, SLURM_NODE_LINES.format(facts=folder), hosts=("h1", "h2"))
    assert list(tmp_path.glob("h*/*")) == []


def test_a_node_outside_limit_left_out_of_the_slurm_files_is_a_warning_and_exit_1(tmp_path):
    """h2's probed facts (nvidia-smi failed) leave it out of the node lines every host of the run
    gets. With --limit leaving h2 out of the run no task of h2's fails, yet the cluster-wide file
    written on the others drops it: that is said (a warning naming h2 and why) and the run exits 1,
    as it does when h2 is in the run; before, it was silent and exited 0."""
    import dataclasses
    import json

    from conftest import run_cli
    from plan_support import minsky

    folder = tmp_path / "facts"
    folder.mkdir()
    for name in ("localhost", "h2"):
        facts = dataclasses.replace(minsky(name), **({"gpus": (), "unavailable": NVIDIA_SMI_FAILED} if name == "h2" else {}))
        (folder / f"{name}.json").write_text(json.dumps(facts.to_dict()))
    (tmp_path / "pb.yml").write_text(
        "- hosts: all\n  tasks:\n    - name: node lines\n      file:\n"
        f"        path: {tmp_path}/nodes.conf\n"
        f"        content: \"{{{{ ({{}} | slurm_files(groups, '{folder}', '.', inventory_hostname)).node_lines }}}}\"\n"
    )
    (tmp_path / "hosts.yml").write_text("hosts:\n  localhost: {}\n  h2: {address: 127.0.0.1, port: 1}\n")
    done = run_cli(
        "setup-cluster", "-i", str(tmp_path / "hosts.yml"), "--playbook", str(tmp_path / "pb.yml"), "--limit", "localhost"
    )
    assert [line.split()[0] for line in (tmp_path / "nodes.conf").read_text().splitlines()[1:]] == ["NodeName=localhost"]
    assert done.returncode == 1, done.stdout + done.stderr
    warned = [line for line in done.stderr.splitlines() if "h2" in line]
    assert len(warned) == 1 and "host h2: nvidia-smi failed (exit 9" in warned[0], done.stderr
    assert "slurm.conf and gres.conf are written without h2" in warned[0] and "outside this run" in warned[0]


def test_two_inventory_hosts_with_one_node_name_are_bad_input_before_any_host(tmp_path):
    """n1.a and n1.b are both NodeName n1: the inventory's error, for the user to fix (exit 2, no
    host touched), never n1.b's fault ('fix the host name on n1.b') with the run going on."""
    import json

    from plan_support import minsky

    folder = tmp_path / "facts"
    folder.mkdir()
    for name in ("n1.a", "n1.b"):
        (folder / f"{name}.json").write_text(json.dumps(minsky(name).to_dict()))
    with pytest.raises(BadInput, match=r"host n1\.b: NodeName 'n1' is also host n1\.a's"):
        make(tmp_path, SLURM_NODE_LINES.format(facts=folder), hosts=("n1.a", "n1.b"))
    assert list(tmp_path.glob("n1.*/*")) == []


def test_whole_cluster_filters_are_derived_once_per_play(tmp_path, monkeypatch):
    """Issue 37: templates get hostvars as a snapshot made after each play and play_hosts as one
    tuple per play, so the home writer (asked by each task on each host) is found once per play:
    scanning every host on every ask was O(hosts²), most of a no-change run's CPU at 1024 hosts."""
    import provision.templating.filters as filters

    scans, scan = [], filters._home_writer

    def counted(*args):
        scans.append(args)
        return scan(*args)

    monkeypatch.setattr(filters, "_home_writer", counted)
    task = """
    - file: {path: "{{ root }}/%s", content: "x"}
      when: (hostvars | home_writer(play_hosts, true)) == inventory_hostname
"""
    first_round_trip = "- hosts: all\n  tasks: []\n"  # hosts answer here: hostvars live from the next play on
    playbook = first_round_trip + "- hosts: all\n  tasks:" + task % "first" + "- hosts: all\n  tasks:" + task % "second"
    hosts = tuple(f"h{i:02d}" for i in range(1, 13))
    report = make(tmp_path, playbook=playbook, hosts=hosts).run()
    assert report.ok and sorted(p.name for p in (tmp_path / "h01").iterdir()) == ["first", "second"]
    assert not any(list((tmp_path / h).iterdir()) for h in hosts[1:])
    running = [args for args in scans if isinstance(args[0], dict)]  # before the run hostvars is not known yet (Undefined)
    assert len(running) == 2 and all(isinstance(args[0], filters.HostVars) for args in running)
    assert running[0][0] is not running[1][0]  # each play its own snapshot


FORESEEN = """
- name: preconditions after changes that may alter anything
  hosts: all
  tasks:
    - name: a command that may change anything
      command: {cmd: "echo x >> {{ root }}/log"}
    - name: a file the task edits and never creates
      line: {path: "{{ root }}/missing.conf", line: "wanted", create: false}
    - name: never reached
      file: {path: "{{ root }}/after", content: "after\\n"}
"""

NO_SYSTEMD = """
- name: a service after changes that may alter anything
  hosts: all
  tasks:
    - name: a command that may change anything
      command: {cmd: "echo x >> {{ root }}/log"}
    - name: the service
      service: {name: provision-test-unit, state: started, enabled: true, daemon_reload: true}
"""


def outcome(report) -> list[tuple[str, str, str]]:
    return [(r.task, r.status, r.message) for r in report.results]


@pytest.mark.parametrize("playbook", [FORESEEN, NO_SYSTEMD], ids=["file-it-edits", "no-systemd"])
def test_check_foresees_the_failure_the_real_run_has(tmp_path, playbook):
    """Issue 34: after a change that may alter anything, --check predicted success (changed) for a
    task whose precondition the host fails; the real run then failed. --check now reports the
    failure it foresees, at the same task, with the same message, and the host stops there."""
    import os

    if playbook is NO_SYSTEMD and os.path.isdir("/run/systemd/system"):
        pytest.skip("this machine runs systemd: the no-systemd case needs a host without it")
    make(tmp_path, playbook, hosts=("h1",))
    checked = make(tmp_path, playbook, hosts=("h1",), check=True).run()
    real = make(tmp_path, playbook, hosts=("h1",)).run()
    assert outcome(checked) == outcome(real), (outcome(checked), outcome(real))
    failed = [r for r in checked.results if r.status == "failed"]
    assert len(failed) == 1 and recap(checked)["h1"][2] == 1, outcome(checked)
    assert (
        "does not exist: this task edits an existing file" in failed[0].message or "systemd is not running" in failed[0].message
    )
    if playbook is FORESEEN:  # foreseen on the state read before the command (it may alter anything): said in -v
        assert failed[0].detail.startswith("foreseen on the state read before the changes above"), failed[0].detail
    assert not (tmp_path / "h1" / "after").exists()


def test_check_reads_a_fact_never_read_rather_than_take_it_for_absent(tmp_path):
    """A fact not read in the first round trip (its path known only while running) and altered
    since: --check reads it (the state before the changes, which it predicts on), never takes it
    for absent and foresees a failure that will not happen."""
    playbook = """
- name: p
  hosts: all
  tasks:
    - name: where
      command: {cmd: "true"}
      register: where
    - name: a command that may change anything
      command: {cmd: "echo x >> {{ root }}/log"}
    - name: a line in a file that exists, its path known only while running
      line: {path: "{{ root }}/{{ 'existing' if where.changed else 'none' }}", line: "wanted", create: false}
"""
    make(tmp_path, playbook, hosts=("h1",))
    (tmp_path / "h1" / "existing").write_text("first\n")
    checked = make(tmp_path, playbook, hosts=("h1",), check=True).run()
    assert recap(checked)["h1"][2] == 0 and [r.status for r in checked.results] == ["changed", "changed", "changed"]


def test_check_predicts_on_what_a_planned_change_would_set(tmp_path):
    """Issue 34: on fresh nodes `--check` said `ssh_keypair: user alice does not exist` (failed) for
    the key pair after the planned useradd: the user had been decided on stale facts (the group
    change before it), so its effect was unknown and the key pair fell back to the user read before
    (absent). What a change decided on stale facts would set is the hint later tasks predict on."""
    import pwd

    name = "provtest34"
    try:
        pwd.getpwnam(name)
        pytest.skip(f"{name} exists on this machine")
    except KeyError:
        pass
    playbook = f"""
- name: p
  hosts: all
  tasks:
    - {{name: group, group: {{name: {name}, gid: 63434}}}}
    - {{name: user, user: {{name: {name}, uid: 63434, group: {name}}}}}
    - {{name: key pair, ssh_keypair: {{user: {name}}}}}
"""
    checked = make(tmp_path, playbook, hosts=("h1",), check=True).run()
    assert [(r.task, r.status) for r in checked.results] == [
        ("group", "changed"),
        ("user", "changed"),
        ("key pair", "changed"),
    ], [(r.task, r.status, r.message) for r in checked.results]


def test_connect_ahead_starts_the_hosts_the_run_reaches_first_and_the_run_uses_those_sessions(tmp_path):
    """Issue 37: the handshakes of the first ``forks`` hosts start before prepare's checks; the run
    then uses those very sessions (one connection per host), and reaches the others as before."""
    ahead = []

    class AheadSession(LocalSession):
        def open_ahead(self):
            ahead.append(self)

    runner = make(tmp_path, hosts=("h1", "h2", "h3"), forks=2)
    runner.session_factory, runner.sessions = AheadSession, {}
    runner.connect_ahead()
    assert [s.host.name for s in ahead] == ["h1", "h2"]
    report = runner.run()
    assert recap(report) == {h: (7, 7, 0, 0, 0) for h in ("h1", "h2", "h3")}
    assert all(report.runs[s.host.name].session is s and s.round_trips >= 1 for s in ahead)


def test_connect_ahead_takes_the_first_plays_hosts_only(tmp_path):
    """A playbook whose first play runs on one host: the others are not connected ahead (they
    would sit idle through that play)."""
    ahead = []

    class AheadSession(LocalSession):
        def open_ahead(self):
            ahead.append(self.host.name)

    playbook = PLAYBOOK.replace("hosts: all", "hosts: h2", 1) + PLAYBOOK.replace("- name: files", "- name: again", 1)
    runner = make(tmp_path, playbook=playbook, hosts=("h1", "h2", "h3"))
    runner.session_factory, runner.sessions = AheadSession, {}
    runner.connect_ahead()
    assert ahead == ["h2"]
