"""What the command line prints on stderr, one way each: errors, warnings, notes and "wrote" lines.

Every line starts with what it is (``provision: error:``, ``provision: warning:``, ``note:``,
``wrote``), names the host or file it concerns, and escapes nothing a user typed into markup.
Rich is imported on first use, not at start-up.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import typer

from provision.text import shown


@lru_cache(maxsize=1)
def _safe_console() -> type:
    """rich's Console, for every line provision prints: each string it renders (a message, a table
    cell, a tree label, an error) has its control characters escaped first (:func:`shown`), so text
    a node sent is seen, never obeyed by the terminal; our own markup holds none. Made on first use
    (rich is not imported at start-up)."""
    from rich.console import Console

    class SafeConsole(Console):
        def render_str(self, text: str, **options):
            """The string as rich's Text, control characters escaped (widths are measured after)."""
            return super().render_str(shown(text), **options)

    return SafeConsole


@lru_cache(maxsize=1)
def stderr():
    """The stderr console (rich), made on first use; it writes to whatever ``sys.stderr`` is then."""
    return _safe_console()(stderr=True)


def stdout():
    """A console on stdout (rich) for tables and trees."""
    return _safe_console()()


def _line(label: str, style: str, message: str) -> None:
    if not sys.stderr.isatty():  # the same text rich would write to a pipe or file, without importing rich
        typer.echo(f"{label} {shown(message)}", err=True)
        return
    from rich.markup import escape

    stderr().print(f"[{style}]{label}[/{style}] {escape(message)}", highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``provision: error: message`` on stderr and return the Exit to raise."""
    _line("provision: error:", "bold red", message)
    return typer.Exit(code)


def error(message: str) -> None:
    """Print ``provision: error: message`` on stderr; the run goes on (other hosts, other files)."""
    _line("provision: error:", "bold red", message)


def warn(message: str) -> None:
    """Print ``provision: warning: message`` on stderr (one line; the run goes on)."""
    _line("provision: warning:", "bold yellow", message)


def note(message: str) -> None:
    """Print ``note: message`` on stderr: something the user may want to know, not a problem."""
    _line("note:", "yellow", message)


def wrote(what: str, path: Path, backup: Path | None) -> None:
    """One stderr line: what was written where (absolute), and where a file it replaced was kept."""
    kept = f" (the file that was there is kept as {Path(backup).resolve()})" if backup else ""
    stderr().print(f"wrote {what} {Path(path).resolve()}{kept}", highlight=False, soft_wrap=True, markup=False)


def write_or_print(text: str, output: Path | None, what: str = "") -> None:
    """``text`` on stdout, or written to ``output`` atomically (an old file kept as FILE~) and said."""
    if output is None:
        typer.echo(text, nl=False)
        return
    from provision.files import write_atomic

    wrote(what or "file", output, write_atomic(output, text))


def command_again(ctx: typer.Context, drop: tuple[str, ...] = ()) -> str:
    """The command the user typed, as a line to paste: ``provision`` + the command + every option
    given on the command line (not from the environment, a config file or a default), each value
    shell-quoted, less the parameters named in ``drop`` (``("limit",)`` for a hint to run without
    --limit). Example: ``provision setup-cluster -i inv/hosts.yml --known-hosts kh --tags ssh``."""
    import shlex

    def text(value) -> str:  # 2.0 typed as 2 reads as typed
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)

    words = ctx.command_path.split()
    arguments = []
    for param in ctx.command.params:
        if param.name in drop or param.name is None:
            continue
        source = ctx.get_parameter_source(param.name)
        if source is None or source.name != "COMMANDLINE":
            continue
        value = ctx.params.get(param.name)
        if param.param_type_name == "argument":
            arguments += [str(v) for v in (value if isinstance(value, (list, tuple)) else [value]) if v is not None]
            continue
        flag = max(param.opts, key=len)  # the long form reads best in a hint
        if getattr(param, "count", False):
            words += [flag] * int(value or 0)
        elif getattr(param, "is_flag", False):
            if param.secondary_opts and not value:
                words.append(max(param.secondary_opts, key=len))
            elif value:
                words.append(flag)
        elif getattr(param, "multiple", False):
            for item in value or ():
                words += [flag, text(item)]
        elif value is not None:
            words += [flag, text(value)]
    return " ".join(shlex.quote(word) for word in [*words, *arguments])
