"""The documentation site builds (``mkdocs build --strict``) and its reference pages, generated from the
code by docs/hooks/reference.py, name every command, option, operation, role variable, capture and
config key the code declares. The expected names are read here from the code itself."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from provision.cli import app
from provision.cli.config import SETTINGS
from provision.playbook.model import operation_args, operation_doc, operation_names
from provision.playbook.role_variables import load_roles
from provision.probe.gather import STEPS

pytest.importorskip("mkdocs", reason="the docs extra (pip install '.[docs]') is not installed")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built strictly (a broken link, anchor or snippet fails) into a temporary folder."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        # the console script, not `python -m mkdocs`: -m would put the checkout (cwd) first on sys.path and
        # the hook would describe the checkout's provision instead of the installed one under test
        [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(target)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return target


def sections(page: Path) -> dict[str, str]:
    """Each ``<h2 id=...>`` section of a built page as plain text (tags dropped, entities decoded)."""
    text = page.read_text()
    parts = re.split(r'<h2 id="([^"]+)"', text)
    return {parts[i]: html.unescape(re.sub(r"<[^>]+>", " ", parts[i + 1])) for i in range(1, len(parts), 2)}


def has_word(text: str, word: str) -> bool:
    """``word`` in ``text`` as a whole (``--force`` is not found in ``--force-x``)."""
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def commands():
    """(path, command) of every command, through click's public API (a lazily loaded command is loaded)."""
    group = typer.main.get_command(app)

    def walk(group, ctx):
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            sub = typer.Context(command, info_name=name, parent=ctx)
            if hasattr(command, "list_commands"):
                yield from walk(command, sub)
            elif not command.hidden:
                yield sub.command_path, command

    return list(walk(group, typer.Context(group, info_name="provision")))


def test_every_command_and_option_is_in_the_cli_reference(site):
    found = sections(site / "reference" / "cli" / "index.html")
    listed = commands()
    assert len(listed) >= 13  # inventory show/example/import, probe, ... (a walk that finds nothing fails)
    for path, command in listed:
        anchor = path.replace(" ", "-")
        assert anchor in found, f"{path}: no section in the CLI reference"
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            names = [*param.opts, *param.secondary_opts] if param.param_type_name == "option" else [param.name.upper()]
            for name in names:
                assert has_word(found[anchor], name), f"{path}: {name} missing from the CLI reference"


def test_every_command_s_help_reads_in_the_page_as_in_the_terminal(site):
    """Issue 34: the page lost text a browser takes for HTML (``group_vars/<group>.yml`` showed as
    ``group_vars/.yml``); every paragraph of every command's help is on its page as ``--help`` says
    it, read from the built HTML as a browser shows it (tags dropped, entities decoded)."""
    found = sections(site / "reference" / "cli" / "index.html")
    checked = 0
    for path, command in commands():
        section = " ".join(found[path.replace(" ", "-")].split())
        for paragraph in re.split(r"\n\s*\n", (command.help or "").strip()):
            text = " ".join(paragraph.replace("`", "").split())
            assert text in section, f"{path}: the page shows its help otherwise: {text[:120]}"
            checked += "<" in text
    assert checked, "no help holds a '<' any more: the check would not catch the lost text"


def test_every_operation_and_argument_is_in_the_operations_reference(site):
    found = sections(site / "reference" / "operations" / "index.html")
    names = operation_names()
    assert {"file", "template", "command", "nfs_mount"} <= set(names)
    for name in names:
        assert name in found, f"operation {name}: no section"
        assert " ".join(operation_doc(name).split()) in " ".join(found[name].split()), name
        for arg, spec in operation_args(name).items():
            assert spec.help, f"operation {name}: argument {arg} has no help"
            section = " ".join(found[name].split())
            assert has_word(section, arg) and " ".join(spec.help.split()) in section, f"{name}: {arg} missing"


def test_every_role_variable_is_in_the_role_reference(site):
    found = sections(site / "reference" / "role-variables" / "index.html")
    for role in load_roles().values():
        assert role.name in found, f"role {role.name}: no section"
        text = " ".join(found[role.name].split())
        for variable in role.variables.values():
            assert has_word(text, variable.name), f"role {role.name}: {variable.name} missing"
            assert " ".join(variable.effect.split()) in text, f"role {role.name}: {variable.name}'s effect missing"


def test_every_capture_and_config_key_is_in_the_reference(site):
    capture = html.unescape(re.sub(r"<[^>]+>", " ", (site / "reference" / "capture-format" / "index.html").read_text()))
    for step in STEPS:
        assert has_word(capture, step.name), f"capture {step.name} missing"
    config = html.unescape(re.sub(r"<[^>]+>", " ", (site / "reference" / "config" / "index.html").read_text()))
    for key, setting in SETTINGS.items():
        assert has_word(config, key) and has_word(config, setting.env), f"config key {key} missing"


def test_the_drafts_in_docs_notes_are_not_published(site):
    """Engineers' notes (docs/notes/<branch>.md) are folded into the pages by hand at merge, never
    built as pages of their own (and never fail the strict build)."""
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"))
    assert config.exclude_docs.match_file("notes/nccl.md") and not config.exclude_docs.match_file("how-to/doctor.md")
    assert not (site / "notes").exists()
