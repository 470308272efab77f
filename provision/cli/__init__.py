"""The `provision` command line (Typer). Each sub-module adds one family of commands."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

from provision import __version__
from provision.errors import ProvisionError

app = typer.Typer(
    name="provision",
    help="Prepare GPU clusters for distributed deep-learning training.\n\n"
    "Probe each node's real hardware over SSH, then derive rank files, mpirun commands and "
    "hostfiles from the facts, never from assumptions.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
inventory_app = typer.Typer(help="Show or import inventories.", no_args_is_help=True)
app.add_typer(inventory_app, name="inventory")

stderr = Console(stderr=True)


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
    try:
        code = app(standalone_mode=False)
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
