"""The installed `provision` command: help, exit codes, one-line errors."""

import json

import pytest

from conftest import run_cli


def test_help_has_examples_on_every_command():
    for command in (
        ["probe"],
        ["capture-script"],
        ["inventory", "show"],
        ["inventory", "import"],
        ["rankfile"],
        ["launch"],
        ["topology"],
        ["slurm-nodes"],
    ):
        done = run_cli(*command, "--help")
        assert done.returncode == 0 and "Example" in done.stdout, command


def test_probe_localhost_main_job(tmp_path):
    # From an empty folder: a developer's own inventory/hosts.yml in the checkout cannot change `localhost`.
    done = run_cli("probe", "localhost", "--facts-dir", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "socket 0: cores 0-" in done.stdout and "slot=0:0-" in done.stdout
    assert (tmp_path / "localhost.json").exists() and (tmp_path / "localhost" / "uname-m.txt").exists()


def test_replay_json(tmp_path):
    done = run_cli("probe", "--replay", "tests/fixtures/captures", "minsky", "epyc7451", "--json", "--facts-dir", str(tmp_path))
    doc = json.loads(done.stdout)
    assert [h["status"] for h in doc["hosts"]] == ["ok", "ok"]
    assert doc["heterogeneity"] and "epyc7451" in doc["heterogeneity"][1]


def test_bad_inventory_is_one_line_with_file_and_line(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("hosts:\n  n1:\n    user: 'x; rm -rf ~'\n")
    done = run_cli("probe", "-i", str(inventory))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert f"{inventory}:3:" in done.stderr and "Traceback" not in done.stderr


def test_unknown_host_and_unsafe_name(tmp_path):
    # Independent of the developer's ~/.ssh/config and known_hosts (a ProxyJump there would change the error).
    (tmp_path / "ssh_config").write_text("")
    done = run_cli(
        "probe",
        "no-such-host.invalid",
        "--connect-timeout",
        "2",
        "--facts-dir",
        str(tmp_path),
        "--ssh-config",
        str(tmp_path / "ssh_config"),
        "--known-hosts",
        str(tmp_path / "known_hosts"),
    )
    assert done.returncode == 1 and "no-such-host.invalid" in done.stderr and "resolve" in done.stderr
    done = run_cli("probe", "bad;name")
    assert done.returncode == 2 and "bad;name" in done.stderr


def test_inventory_import_and_show(tmp_path):
    source = tmp_path / "ansible.ini"
    source.write_text("[rack1]\nn1 ansible_host=10.0.0.1\nn2\n")
    target = tmp_path / "hosts.yml"
    target.write_text("# my old inventory\n")
    done = run_cli("inventory", "import", str(source), "-o", str(target))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "hosts.yml~").read_text() == "# my old inventory\n"
    shown = run_cli("inventory", "show", "-i", str(target))
    assert "rack 1 rack1: n1, n2" in shown.stdout and "10.0.0.1" in shown.stdout


def test_unknown_option_is_one_line_and_exit_2():
    # Fails where typer's click is not `click` (a fresh venv has no click): the import crashed.
    for args in (["--bogus"], ["probe", "--bogus"], ["inventory", "show", "--bogus"]):
        done = run_cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith("provision: error: No such option: --bogus"), done.stderr


def test_bad_option_value_is_one_line_and_exit_2():
    done = run_cli("probe", "--forks", "0")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--forks" in done.stderr, done.stderr


def test_version():
    done = run_cli("--version")
    assert done.returncode == 0 and done.stdout.startswith("provision ")


def test_facts_that_cannot_be_saved_are_one_line_each_and_the_rest_still_printed(tmp_path):
    """Tests run as root, where chmod does not stop writes: a regular file stands where a folder must go."""
    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "minsky").write_text("a file where minsky's capture folder goes")
    done = run_cli("probe", "--replay", "tests/fixtures/captures", "minsky", "epyc7451", "--facts-dir", str(facts))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "minsky" in done.stdout and "epyc7451" in done.stdout  # both hosts' results printed
    errors = [line for line in done.stderr.splitlines() if "cannot save" in line]
    assert len(errors) == 1 and str(facts / "minsky") in errors[0], done.stderr
    assert (facts / "epyc7451.json").exists() and not (facts / "minsky.json").exists()

    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    done = run_cli(
        "probe", "--replay", "tests/fixtures/captures", "minsky", "epyc7451", "--json", "--facts-dir", str(blocked / "facts")
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert [h["status"] for h in json.loads(done.stdout)["hosts"]] == ["ok", "ok"]
    assert [line for line in done.stderr.splitlines() if "cannot save" in line and str(blocked) in line] != []
    assert len(done.stderr.strip().splitlines()) == 2, done.stderr  # one line per host


def test_error_with_rich_markup_characters_is_one_plain_line(tmp_path):
    # `[/x]` once raised rich's MarkupError (a traceback); `[fe80::1]` vanished as a "tag".
    done = run_cli("probe", "[/x]", "--facts-dir", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "[/x]" in done.stderr
    done = run_cli("probe", "[fe80::1]", "--facts-dir", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "[fe80::1]" in done.stderr, done.stderr


def test_run_passes_each_word_as_typed_and_reports_each_host(tmp_path):
    done = run_cli("run", "localhost", "--", "sh", "-c", 'printf "%s|" "$@"; echo; exit 3', "x", "a b", "$(id)", ";")
    assert done.returncode == 1, done.stderr
    assert done.stdout == "localhost | rc=3\nlocalhost: a b|$(id)|;|\n"
    assert "1 of 1 hosts failed: localhost" in done.stderr
    done = run_cli("run", "localhost", "--shell", "echo out; printf 'oops\\nmore' >&2; exit 1")
    assert done.stdout == "localhost | rc=1\nlocalhost: out\n"
    assert "localhost: oops\nlocalhost: more\n" in done.stderr  # stderr read apart still names its host
    done = run_cli("run", "localhost", "--shell", "echo $((6*7)) | cat")
    assert done.returncode == 0 and done.stdout == "localhost | rc=0\nlocalhost: 42\n", done.stderr
    done = run_cli("run", "localhost", "--", "printf", "\033[2Jx")
    assert "\\x1b[2Jx" in done.stdout and "\033" not in done.stdout  # a host's escape sequences are shown, not run
    done = run_cli("run", "localhost")
    assert done.returncode == 2 and "no command" in done.stderr


# Values a user gave, in a one-line error: as typed, in single quotes, control characters escaped
# (provision.text.shown_value), never Python's repr: no doubled backslash, no switch to double
# quotes, no None/True, no Python type names.
PLAY_HEAD = "- hosts: all\n  tasks:\n    - name: a\n"


@pytest.mark.parametrize(
    ("files", "args", "expected"),
    [
        # an option's value
        ({}, ["rankfile", "4x2\\1"], "dims '4x2\\1': expected XxYxZ"),
        ({}, ["doctor", "--perf", "--budget", "it's\x1b[2J"], "--budget 'it's\\x1b[2J': give whole seconds"),
        # the inventory
        ({"hosts.yml": 'hosts:\n  n1:\n    port: "C:\\\\x"\n'}, ["probe"], "hosts.yml:3: host n1: port 'C:\\x' is not a number"),
        # a rank file
        ({"rf": "rank 0=n1 slot=it's\n"}, ["rankfile", "1x1x1", "--check", "rf"], "rf:1: slot 'it's' is not socket:cores"),
        # a playbook's keywords, and an operation's arguments
        (
            {"pb.yml": PLAY_HEAD + "      package:\n        name: htop\n      tags: [a, true]\n"},
            ["setup-cluster", "--playbook", "pb.yml", "--syntax-check"],
            "pb.yml:6: tags must be names, got ['a', true]",
        ),
        (
            {"pb.yml": PLAY_HEAD + "      sysctl:\n        name: net.core.rmem_max\n        value: [1, null]\n"},
            ["setup-cluster", "--playbook", "pb.yml", "--syntax-check"],
            "sysctl: argument 'value' must be text or a whole number, got [1, (empty)]",
        ),
        (
            {"pb.yml": PLAY_HEAD + "      package:\n        name: htop\n"},
            ["setup-cluster", "--playbook", "pb.yml", "--syntax-check", "--start-at-task", "C:\\it's"],
            "--start-at-task 'C:\\it's': no task has this name (tasks: 'a'; see --list-tasks)",
        ),
    ],
)
def test_values_in_errors_are_shown_as_typed_never_as_python_repr(tmp_path, files, args, expected):
    files = {"hosts.yml": "hosts:\n  n1:\n    address: 10.0.0.1\n", **files}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    done = run_cli(*args, "-i", "hosts.yml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and expected in done.stderr, done.stderr
    assert "None" not in done.stderr and "True" not in done.stderr and "\\\\" not in done.stderr
