"""The `provision` command line (Typer). Each sub-module adds one family of commands."""

from __future__ import annotations

import sys

import click
import typer
from rich.console import Console

from provision import __version__
from provision.errors import ProvisionError

app = typer.Typer(
    name="provision",
    help="Prepare GPU clusters for distributed deep-learning training.\n\n"
    "Probe each node's real hardware over SSH, then derive rank files, mpirun commands and "
    "hostfiles from the facts, never from assumptions.",
    no_args_is_help=True,
    add_completion=False,
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


def fail(message: str, code: int = 2) -> "typer.Exit":
    """Print ``provision: error: message`` on stderr and return the Exit to raise."""
    stderr.print(f"[bold red]provision: error:[/bold red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


# Register the commands (imports for their side effect on `app`).
from provision.cli import inventory_cmd, plan_cmd, probe_cmd  # noqa: E402,F401
from provision.cli import setup_cmd  # noqa: E402,F401


def main() -> None:
    """Entry point: run the app, turning provision's errors into one line and exit status 2."""
    try:
        code = app(standalone_mode=False)
    except click.exceptions.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.exceptions.Abort:
        stderr.print("aborted")
        sys.exit(130)
    except ProvisionError as error:
        fail(str(error))
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)
