"""The `provision` command line (Typer).

Commands are registered explicitly in :data:`COMMANDS` (name, module, one-line help) and each
module is imported the first time its command runs or shows its own help: ``provision --help``,
``--version`` and the start of a command import no SSH, Jinja2 or YAML (start-up, issue 28).
A command module declares its commands on its own :func:`command_table` and imports what its
work needs inside the function, so that ``provision CMD --help`` stays as fast.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from dataclasses import dataclass

import typer
from typer.core import TyperGroup

from provision import __version__
from provision.cli.output import fail, stderr
from provision.errors import ProvisionError


@dataclass(frozen=True)
class Command:
    """One top-level command: its name, the module that declares it, its one-line help (shown by
    ``provision --help`` without importing the module; a test keeps it equal to the docstring)."""

    name: str
    module: str
    help: str
    group: bool = False  # the module's commands are this command's subcommands (provision inventory show)


# In the order a user needs them: describe the cluster, probe it, derive plans, set it up (then the rest).
COMMANDS = (
    Command("inventory", "inventory_cmd", "Show or import inventories.", group=True),
    Command("probe", "probe_cmd", "Collect each host's real hardware over SSH (one connection, one command per host)."),
    Command(
        "capture-script",
        "probe_cmd",
        "Print a plain sh script that writes DIR/<hostname>/<name>.txt on a node (nothing to install).",
    ),
    Command("rankfile", "plan_cmd", "Write an MPI rank file (rank_gen numbering) with slots from each host's probed cores."),
    Command("launch", "plan_cmd", "Print (or --run) the mpirun command for a rank file made from the facts."),
    Command(
        "topology",
        "plan_cmd",
        "Show which rank is bound to which cores, and which GPU it drives: racks → hosts → sockets.",
    ),
    Command("slurm-nodes", "slurm_cmd", "slurm.conf NodeName lines from facts, in slurmd -C's format, with Gres=gpu:N."),
    Command(
        "setup-cluster",
        "setup_cmd",
        "Make the cluster ready for distributed training: the same users (uid/gid) on every node, passwordless SSH "
        "all-to-all, an NFS share, Anaconda in /opt with a clone per user, Jupyter, and (asked for) Slurm's node lines "
        "and gres.conf from the probed facts.",
    ),
    Command(
        "run",
        "run_cmd",
        "Run one command on hosts or groups (or copy a file to them): each host's output under its name, exit 1 if any failed.",
    ),
    Command(
        "doctor",
        "doctor_cmd",
        "Check that the nodes are ready for one multi-node training job, comparing them with each other.",
    ),
    Command(
        "slurm-gres",
        "slurm_cmd",
        "gres.conf from probed GPUs: one line per GPU with Slurm's logical Cores=, hosts alike folded into hostlists.",
    ),
)
# What to type after an option, by its value type (typer would show <path>, <list[str]>, <int range>):
# typer 0.29's type names, and the click type names typer 0.28 gives.
METAVARS = {"Path": "PATH", "int": "N", "float": "NUMBER", "str": "TEXT"}
CLICK_METAVARS = {"path": "PATH", "int": "N", "int range": "N", "float": "NUMBER", "float range": "NUMBER", "str": "TEXT"}


def command_table(**kwargs) -> typer.Typer:
    """The Typer a command module declares its commands on (help as plain text, as the root's)."""
    return typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False, add_completion=False, **kwargs)


def load_command(entry: Command):
    """The click command of ``entry``, its module imported now (help made ready)."""
    module = importlib.import_module(f"provision.cli.{entry.module}")
    table = module.commands
    if entry.group:
        command = typer.main.get_group(table)
        command.name = entry.name
    else:
        command = typer.main.get_group(table).commands[entry.name]
    help_ready(command)
    return command


class Commands(TyperGroup):
    """Commands listed in :data:`COMMANDS`' order (others after them), each with its whole first
    paragraph wrapped at word boundaries (click would cut it with "..."). At the top level a
    command's module is imported only when that command is looked up to run or show its help."""

    def list_commands(self, ctx) -> list[str]:
        """The commands in the order a user needs them."""
        names = [entry.name for entry in COMMANDS] if self.name == "provision" else []
        return names + [name for name in super().list_commands(ctx) if name not in names]

    def get_command(self, ctx, name: str):
        """The command ``name``, its module imported on this first use."""
        if name not in self.commands and self.name == "provision":
            entry = next((entry for entry in COMMANDS if entry.name == name), None)
            if entry is not None:
                self.commands[name] = load_command(entry)
        return super().get_command(ctx, name)

    def format_commands(self, ctx, formatter) -> None:
        """The Commands section: name and first paragraph of each command's help."""
        listed = {entry.name: entry.help for entry in COMMANDS} if self.name == "provision" else {}
        rows = []
        for name in self.list_commands(ctx):
            if name in listed and name not in self.commands:
                rows.append((name, listed[name]))
                continue
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
            if not hasattr(param, "bare_type"):  # typer 0.28: the usage line as 0.29 writes it, {DIMS} [HOSTS]...
                param.make_metavar = _usage_metavar(param.metavar, param.required, param.nargs != 1)
        elif not param.is_flag and not param.count:
            param.metavar = _metavar(param)
    if command.epilog:  # example command lines are shown as written, never re-wrapped
        command.epilog = "\n\n".join("\b\n" + part if part.startswith("  ") else part for part in command.epilog.split("\n\n"))
    for sub in getattr(command, "commands", {}).values():
        help_ready(sub)


def _usage_metavar(name: str, required: bool, many: bool):
    """An argument's make_metavar: ``NAME`` in its help, ``{NAME}`` (required) or ``[NAME]`` in the
    usage line, ``...`` after it when it takes several values."""

    def make(ctx=None, *, usage: bool = False) -> str:
        if not usage:
            return name
        return (f"{{{name}}}" if required else f"[{name}]") + ("..." if many else "")

    return make


def _metavar(param) -> str | None:
    """PATH, N, NUMBER or TEXT for an option's value type (None: typer's own)."""
    if hasattr(param, "bare_type"):  # typer 0.29
        bare = param.bare_type()
        return METAVARS.get(bare[5:-1] if bare.startswith("list[") else bare)
    return CLICK_METAVARS.get(getattr(param.type, "name", ""))


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


def _usage_line(error: typer.TyperException) -> str:
    """One line for a usage error, with the command it concerns and where to find help."""
    ctx = getattr(error, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"{error.format_message()}{where}"


def command_line() -> None:
    """The ``provision`` command (and ``python -m provision``): :func:`main` on the command line,
    then the process ends without the interpreter's last garbage collection, which walks every
    object the run made (~0.07-0.09 s after imports alone, on every command; measured in
    docs/benchmarks.md). ``gc.freeze()`` leaves them to the process's end: files are closed and
    streams flushed as ever (by their owners, atexit and the interpreter), only objects in
    reference cycles are not collected before the exit frees them all. Not :func:`main` itself:
    tests call it many times in one process."""
    import gc

    try:
        main()
    finally:
        gc.freeze()


def main(args: list[str] | None = None) -> None:
    """Entry point: run the app on ``args`` (default: the command line), turning usage errors and
    provision's errors into one line; always ends in ``sys.exit``.

    Typer (0.28 and later) bundles its own copy of click; its usage errors (unknown option, bad
    value: exit 2) and file errors all derive from ``typer.TyperException``, so only typer's public
    API is used here and `click` need not be installed.
    """
    command = typer.main.get_command(app)
    help_ready(command)
    try:
        code = command.main(args=args, prog_name="provision", standalone_mode=False)
    except typer.TyperException as error:
        if type(error).__name__ == "NoArgsIsHelpError":  # bare `provision`: the help, as typer does
            if error.format_message():
                typer.echo(error.format_message(), err=True)
        else:
            fail(_usage_line(error), error.exit_code)
        sys.exit(error.exit_code)
    except typer.Abort:
        stderr().print("aborted")
        sys.exit(130)
    except ProvisionError as error:
        fail(str(error))
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)
