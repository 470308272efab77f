"""The `provision` command line (Typer). Each sub-module adds one family of commands."""

from __future__ import annotations

import inspect
import sys

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from provision import __version__
from provision.errors import ProvisionError
from provision.text import shown

# The order a user needs the commands in: describe the cluster, probe it, derive plans, set it up.
COMMAND_ORDER = (
    "inventory",
    "probe",
    "capture-script",
    "rankfile",
    "launch",
    "topology",
    "slurm-nodes",
    "setup-cluster",
    "run",
)
# What to type after an option, by its value type (typer would show <path>, <list[str]>, <int range>).
METAVARS = {"Path": "PATH", "int": "N", "float": "NUMBER", "str": "TEXT"}


class Commands(TyperGroup):
    """Commands in :data:`COMMAND_ORDER` (others after them), each listed with its whole first
    paragraph wrapped at word boundaries (click would cut it with "...")."""

    def list_commands(self, ctx) -> list[str]:
        """The commands in the order a user needs them."""
        names = list(super().list_commands(ctx))
        return sorted(names, key=lambda n: COMMAND_ORDER.index(n) if n in COMMAND_ORDER else len(COMMAND_ORDER))

    def format_commands(self, ctx, formatter) -> None:
        """The Commands section: name and first paragraph of each command's help."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                text = command.short_help or inspect.cleandoc(command.help or "").split("\n\n")[0]
                rows.append((name, " ".join(text.split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def help_ready(command) -> None:
    """Give every option that takes a value a metavar saying what to type (PATH, N, TEXT) and
    every argument its name (DIMS), in ``command`` and its subcommands (flags show none); keep
    the example lines of epilogs as written."""
    for param in command.params:
        if param.metavar is not None:
            continue
        if param.param_type_name == "argument":
            param.metavar = param.name.upper()
            param.display_type_rich = lambda ctx: None  # "DIMS", not "dims <str>": the help says what it is
        elif not param.is_flag and not param.count:
            bare = param.bare_type()
            param.metavar = METAVARS.get(bare[5:-1] if bare.startswith("list[") else bare)
    if command.epilog:  # example command lines are shown as written, never re-wrapped
        command.epilog = "\n\n".join("\b\n" + part if part.startswith("  ") else part for part in command.epilog.split("\n\n"))
    for sub in getattr(command, "commands", {}).values():
        help_ready(sub)


def _wrap_between_words() -> None:
    """Help text wraps between words only: click's wrapper would break ``setup-cluster.yml`` or
    ``all-to-all`` at the hyphen. (typer bundles click as ``typer._click``; if that ever moves,
    help keeps click's wrapping.)"""
    try:
        from typer._click import _textwrap
    except ImportError:  # pragma: no cover - a typer without its own click
        return

    class _Wrapper(_textwrap.TextWrapper):
        def __init__(self, *args, **kwargs):
            kwargs["break_on_hyphens"] = False
            super().__init__(*args, **kwargs)

    _textwrap.TextWrapper = _Wrapper


_wrap_between_words()

app = typer.Typer(
    cls=Commands,
    name="provision",
    help="Prepare GPU clusters for distributed deep-learning training.\n\n"
    "Probe each node's real hardware over SSH, then derive rank files, mpirun commands and "
    "hostfiles from the facts, never from assumptions.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
inventory_app = typer.Typer(help="Show or import inventories.", no_args_is_help=True)
app.add_typer(inventory_app, name="inventory", cls=Commands)


class SafeConsole(Console):
    """rich's Console, for every line provision prints: each string it renders (a message, a table
    cell, a tree label, an error) has its control characters escaped first (:func:`provision.text.shown`),
    so text a node sent is seen, never obeyed by the terminal; our own markup holds none."""

    def render_str(self, text: str, **options):
        """The string as rich's Text, control characters escaped (widths are measured after)."""
        return super().render_str(shown(text), **options)


stderr = SafeConsole(stderr=True)


def version_callback(value: bool) -> None:
    """Print the version and exit."""
    if value:
        typer.echo(f"provision {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True, help="Show the version."),
) -> None:
    """Prepare GPU clusters for distributed deep-learning training."""


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``provision: error: message`` on stderr and return the Exit to raise."""
    stderr.print(f"[bold red]provision: error:[/bold red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def warn(message: str) -> None:
    """Print ``provision: warning: message`` on stderr (one line; the run goes on)."""
    stderr.print(f"[bold yellow]provision: warning:[/bold yellow] {escape(message)}", highlight=False, soft_wrap=True)


# Register the commands (imports for their side effect on `app`).
from provision.cli import (  # noqa: E402,F401
    doctor_cmd,
    inventory_cmd,
    plan_cmd,
    probe_cmd,
    run_cmd,
    setup_cmd,  # noqa: E402,F401
    slurm_cmd,  # noqa: E402,F401
)


def _usage_line(error: typer.TyperException) -> str:
    """One line for a usage error, with the command it concerns and where to find help."""
    ctx = getattr(error, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"{error.format_message()}{where}"


def main() -> None:
    """Entry point: run the app, turning usage errors and provision's errors into one line.

    Typer (0.28 and later) bundles its own copy of click; its usage errors (unknown option, bad
    value: exit 2) and file errors all derive from ``typer.TyperException``, so only typer's public
    API is used here and `click` need not be installed.
    """
    command = typer.main.get_command(app)
    help_ready(command)
    try:
        code = command.main(prog_name="provision", standalone_mode=False)
    except typer.TyperException as error:
        if type(error).__name__ == "NoArgsIsHelpError":  # bare `provision`: the help, as typer does
            if error.format_message():
                typer.echo(error.format_message(), err=True)
        else:
            fail(_usage_line(error), error.exit_code)
        sys.exit(error.exit_code)
    except typer.Abort:
        stderr.print("aborted")
        sys.exit(130)
    except ProvisionError as error:
        fail(str(error))
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)
