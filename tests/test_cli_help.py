"""Help of the installed `provision` command as an 80-column terminal shows it: whole words,
metavars that say what to type, commands in the order a user needs them."""

import os
import re
import subprocess


def help_text(*command: str) -> str:
    done = subprocess.run(
        ["provision", *command, "--help"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"}, timeout=60
    )
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
