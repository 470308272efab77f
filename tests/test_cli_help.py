"""Help of the `provision` command (in process) as an 80-column terminal shows it: whole words,
metavars that say what to type, commands in the order a user needs them; the top-level help lists
each command's own first paragraph without importing its module."""

import re

from conftest import run_in_process


def help_text(*command: str) -> str:
    done = run_in_process(*command, "--help", env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def commands() -> list[list[str]]:
    """Every command and subcommand, as listed by the help itself."""
    found = []
    for name in re.findall(r"^  (\S+)  ", help_text().split("Commands:")[1], re.MULTILINE):
        text = help_text(name)
        subs = re.findall(r"^  (\S+)  ", text.split("Commands:")[1], re.MULTILINE) if "Commands:" in text else []
        found.extend([[name, sub] for sub in subs] or [[name]])
    return found


def test_top_level_commands_in_the_order_a_user_needs_them():
    names = re.findall(r"^  (\S+)  ", help_text().split("Commands:")[1], re.MULTILINE)
    wanted = ["inventory", "probe", "rankfile", "launch", "setup-cluster"]
    assert [n for n in names if n in wanted] == wanted, names


def test_help_fits_80_columns_in_whole_words():
    for command in commands():
        check_help(command)


def check_help(command: list[str]) -> None:
    text = help_text(*command)
    for line in text.splitlines():
        example = line.startswith("    provision ")  # example command lines are kept whole, to copy
        assert example or len(line) <= 80, line
        assert "…" not in line and (not line.endswith("...") or line.startswith("Usage:")), f"text cut: {line!r}"
        assert not re.search(r"[A-Za-z]-$", line), f"word cut at a hyphen: {line!r}"
    for typer_type in ("<bool>", "<str>", "<path>", "<list[", "<int", "<float"):
        assert typer_type not in text, (typer_type, command)


def test_setup_cluster_help_says_what_it_does():
    text = help_text("setup-cluster")
    about = " ".join(text.split("Options:")[0].split())
    for word in ("passwordless SSH all-to-all", "NFS", "Anaconda", "Jupyter", "--tags users|ssh|nfs|anaconda|jupyter"):
        assert word in about, word
    assert "group_vars/ and host_vars/" in about
    forks = " ".join(text.split("--forks")[1].split("--connect-timeout")[0].split())
    assert "probed" not in forks and "worker" not in forks and "Hosts worked on at once" in forks
    assert "--check  " in text and "--templates DIR" in text and "-l, --limit PATTERN" in text
    for flag in ("--list-hosts", "--list-tasks", "--list-tags", "--syntax-check", "--start-at-task NAME", "-v, --verbose"):
        assert flag in text, flag


def test_listed_help_is_each_commands_own_first_paragraph():
    """provision --help shows COMMANDS' one-line help without importing the modules: it must read as
    each command's docstring does (a command whose docstring changes fails here until both agree)."""
    import inspect

    from provision.cli import COMMANDS, load_command

    for entry in COMMANDS:
        command = load_command(entry)
        first = " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())
        assert entry.help == first, entry.name


def test_help_and_version_import_no_command_module_nor_ssh():
    """Start-up (issue 28): `provision --help`, `--version` and `CMD --help` import no command module
    but the one asked for, and none of paramiko, fabric, jinja2, yaml or rich (a fresh interpreter)."""
    import subprocess
    import sys

    heavy = ("paramiko", "fabric", "invoke", "jinja2", "yaml", "rich")
    script = (
        "import sys\nfrom provision.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        f"print(' '.join(sorted(m for m in sys.modules if m.startswith('provision.cli.') or m.split('.')[0] in {heavy!r})))"
    )
    wanted = {"--help": [], "--version": [], "launch": ["plan_cmd"], "setup-cluster": ["setup_cmd"], "probe": ["probe_cmd"]}
    for first, modules in wanted.items():
        args = [first] if first.startswith("-") else [first, "--help"]
        done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120)
        loaded = done.stdout.splitlines()[-1].split() if done.stdout.strip() else []
        assert [m for m in loaded if m.endswith("_cmd")] == [f"provision.cli.{m}" for m in modules], (args, loaded)
        assert not [m for m in loaded if m.split(".")[0] in heavy], (args, loaded)


def test_the_command_ends_without_the_interpreters_last_collection():
    """The ``provision`` command (the console script, ``python -m provision``) freezes what the
    run made on its way out, so the interpreter's last collection does not walk it (issue 37:
    ~0.07-0.09 s on every command); :func:`main`, which tests call in process, does not."""
    import subprocess
    import sys

    script = (
        "import gc, sys\nfrom provision.cli import {entry}\nsys.argv = ['provision', '--version']\n"
        "try:\n    {entry}()\nexcept SystemExit:\n    pass\nprint(gc.get_freeze_count())"
    )
    counts = {}
    for entry in ("command_line", "main"):
        done = subprocess.run([sys.executable, "-c", script.format(entry=entry)], capture_output=True, text=True, timeout=120)
        counts[entry] = int(done.stdout.split()[-1])
    assert counts["command_line"] > 1000 and counts["main"] == 0, counts
