"""MkDocs hook: the reference pages' tables, generated from the code at build time.

A page under ``docs/reference/`` holds its prose and a marker such as ``<!-- reference:cli -->``;
:func:`on_page_markdown` replaces each marker with a table made from what the code declares:

- ``cli``: every command of the Typer app, walked through click's public API (``list_commands`` /
  ``get_command``, which also loads a command that is registered lazily), with its usage, help,
  arguments and options as ``--help`` shows them;
- ``operations``: every operation a playbook task may name
  (:func:`provision.playbook.model.operation_names`, ``template`` included), its doc and each
  argument's type, default and help;
- ``role-variables``: every role of ``playbooks/role-variables.yml``
  (:func:`provision.playbook.role_variables.load_roles`);
- ``capture-steps``: the probe's gather steps (:data:`provision.probe.gather.STEPS`);
- ``config``: the settings of :data:`provision.cli.config.SETTINGS` with their environment
  variable and the option that reads it.

An unknown marker stops the build. mkdocs.yml names this file under ``hooks:``; it imports the
installed provision, so the site describes the code it is built with.
"""

from __future__ import annotations

import html
import re

MARKER = re.compile(r"<!-- reference:([a-z-]+) -->")
_CODE = re.compile(r"`([^`]+)`")


def cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell: HTML-escaped, one line, no character Markdown
    or its extensions would take (pipe, emphasis, ``{attribute list}``, ``[link]``); back-quoted
    parts become ``<code>``."""
    parts = _CODE.split(" ".join(str(text).split()))
    out = []
    for index, part in enumerate(parts):
        escaped = html.escape(part)
        for char in "|*_{}[]":  # table cells, emphasis, attribute lists and links keep them as text
            escaped = escaped.replace(char, f"&#{ord(char)};")
        out.append(f"<code>{escaped}</code>" if index % 2 else escaped)
    return "".join(out)


def prose(text: str) -> str:
    """A help text as Markdown paragraphs, each escaped as :func:`cell` escapes (``<group>`` would
    otherwise be an HTML tag a browser drops: ``group_vars/<group>.yml`` read as
    ``group_vars/.yml``, issue 34)."""
    return "\n\n".join(cell(paragraph) for paragraph in re.split(r"\n\s*\n", text.strip()) if paragraph.strip())


def code(text: str) -> str:
    """``text`` as inline code inside a table cell."""
    return cell(f"`{text}`") if text else ""


# -- the command line ----------------------------------------------------------------------------
def _help_ready(command) -> None:
    """provision's own ``--help`` touches (metavars such as PATH, N), where the CLI has them."""
    import provision.cli

    ready = getattr(provision.cli, "help_ready", None)
    if ready is not None:
        ready(command)


def cli_root():
    """The click group of provision's Typer app, as ``provision.cli.main`` builds it."""
    import typer

    from provision.cli import app

    group = typer.main.get_command(app)
    return group, typer.Context(group, info_name="provision")


def walk_commands(group, ctx):
    """(context, command) for every command below ``group``, depth first, in the help's order."""
    import typer

    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)  # loads a lazily registered command
        if command is None or command.hidden:
            continue
        _help_ready(command)
        sub = typer.Context(command, info_name=name, parent=ctx)
        if hasattr(command, "list_commands"):
            yield from walk_commands(command, sub)
        else:
            yield sub, command


def _epilog(text: str) -> str:
    """An epilog as ``--help`` prints it: click's no-rewrap marks dropped, and no blank line between
    two example lines (the source separates them as paragraphs)."""
    lines = text.replace("\b\n", "").splitlines()
    kept = []
    for index, line in enumerate(lines):
        between = 0 < index < len(lines) - 1 and lines[index - 1].startswith(" ") and lines[index + 1].startswith(" ")
        if line.strip() or not between:
            kept.append(line)
    return "\n".join(kept)


def cli_markdown() -> str:
    group, ctx = cli_root()
    lines = []
    for sub, command in walk_commands(group, ctx):
        path = sub.command_path
        lines += [f"## {path}", "", "```text", command.get_usage(sub).strip(), "```", ""]
        lines += [prose(command.help or ""), ""]
        if command.epilog:
            lines += ["```text", _epilog(command.epilog).strip(), "```", ""]
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        if arguments:
            lines += ["| argument | what it is |", "| --- | --- |"]
            for param in arguments:
                record = param.get_help_record(sub) or (param.metavar or param.name.upper(), "")
                lines.append(f"| {code(record[0])} | {cell(record[1])} |")
            lines.append("")
        options = [(p, p.get_help_record(sub)) for p in command.params if p.param_type_name == "option" and not p.hidden]
        if options:
            lines += ["| option | what it does |", "| --- | --- |"]
            for _param, record in options:
                if record is not None:
                    lines.append(f"| {code(record[0])} | {cell(record[1])} |")
            lines.append("")
    return "\n".join(lines)


# -- operations ----------------------------------------------------------------------------------
def _types(types) -> str:
    return " or ".join(t.__name__ for t in types)


def operations_markdown() -> str:
    from provision.playbook.model import operation_args, operation_doc, operation_names

    lines = []
    for name in operation_names():
        lines += [f"## {name}", "", prose(operation_doc(name).strip() + "."), ""]
        lines += ["| argument | type | required | default | what it is |", "| --- | --- | --- | --- | --- |"]
        for arg, spec in operation_args(name).items():
            default = "" if spec.required or spec.default is None else repr(spec.default)
            required = "yes" if spec.required else ""
            lines.append(f"| {code(arg)} | {cell(_types(spec.types))} | {required} | {code(default)} | {cell(spec.help)} |")
        lines.append("")
    return "\n".join(lines)


# -- role variables ------------------------------------------------------------------------------
def role_variables_markdown() -> str:
    from provision.playbook.role_variables import load_roles

    lines = []
    for role in load_roles().values():
        tags = ", ".join(f"`{tag}`" for tag in role.tags)
        lines += [
            f"## {role.name}",
            "",
            prose(f"{role.summary}. Playbook `{role.playbook}`; runs alone with `--tags` ") + f" {tags}.",
            "",
        ]
        lines += ["| variable | type | default | example | what changes on the node |", "| --- | --- | --- | --- | --- |"]
        for var in role.variables.values():
            lines.append(
                f"| {code(var.name)} | {cell(var.type)} | {cell(var.default)} | {code(var.example)} | {cell(var.effect)} |"
            )
        lines.append("")
    return "\n".join(lines)


# -- capture format and config -------------------------------------------------------------------
def capture_markdown() -> str:
    from provision.probe.gather import STEPS

    lines = ["| name | what it holds | tools it needs | the step the node runs |", "| --- | --- | --- | --- |"]
    for step in STEPS:
        needs = ", ".join(step.needs) or "(none: shell builtins and files)"
        lines.append(f"| {code(step.name)} | {cell(step.describe)} | {cell(needs)} | {code(step.command)} |")
    return "\n".join(lines) + "\n"


def config_markdown() -> str:
    from provision.cli.config import SETTINGS

    group, ctx = cli_root()
    options = {}
    for sub, command in walk_commands(group, ctx):
        for param in command.params:
            if param.param_type_name == "option" and param.envvar and param.envvar not in options:
                record = param.get_help_record(sub)
                options[param.envvar] = (record[0] if record else "", record[1] if record else "")
    lines = ["| key | type | environment variable | option | default | what it sets |", "| --- | --- | --- | --- | --- | --- |"]
    for key, setting in SETTINGS.items():
        option, help_text = options.get(setting.env, ("", ""))
        default = "" if setting.default is None else str(setting.default)
        help_text = re.sub(r"\s*\[env var:.*\]$", "", help_text)
        cells = (code(key), cell(setting.kind.__name__), code(setting.env), code(option), code(default), cell(help_text))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


GENERATORS = {
    "cli": cli_markdown,
    "operations": operations_markdown,
    "role-variables": role_variables_markdown,
    "capture-steps": capture_markdown,
    "config": config_markdown,
}


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace each ``<!-- reference:NAME -->`` marker with NAME's generated Markdown."""

    def generated(match: re.Match) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{page.file.src_path}: unknown reference marker {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return MARKER.sub(generated, markdown)
