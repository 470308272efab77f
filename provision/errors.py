"""Errors that reach the user as one clear line (and a non-zero exit)."""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class ProvisionError(Exception):
    """Base for every error the CLI reports as ``provision: error: <message>``."""


class InventoryError(ProvisionError):
    """A malformed inventory; the message names the file and line."""

    def __init__(self, path: str, line: int | None, message: str):
        self.path, self.line, self.message = path, line, message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


class ParseError(ProvisionError):
    """A command's output could not be understood.

    ``source`` is the capture name (``numactl-H``, ``lscpu-p``...), ``line`` the
    1-based line of that output, when known.
    """

    def __init__(self, source: str, message: str, line: int | None = None):
        self.source, self.message, self.line = source, message, line
        where = f"`{source}` output line {line}" if line else f"`{source}` output"
        super().__init__(f"cannot parse {where}: {message}")


class NotCapturedError(ParseError):
    """A capture the facts need was not collected at all (the command is absent on the host, or a
    replayed folder lacks its file): nothing was there to parse."""

    def __init__(self, source: str, message: str):
        super().__init__(source, message)
        self.args = (f"`{source}` not captured: {message}",)

    def __str__(self) -> str:
        return self.args[0]


class UnsafeFileError(ProvisionError):
    """A file or folder on the controller is refused: a link, a FIFO or device, too large, or a
    folder someone else owns or can write; the message names the path."""


class FactsError(ProvisionError):
    """Facts are missing or corrupt; the message names the host or file."""


class PlanError(ProvisionError):
    """A rank file, launch command or other plan cannot be made from the facts."""


class ArgumentError(ProvisionError):
    """A task gave an operation a missing, unknown or malformed argument, or the command line a
    malformed name (bad input; the message names the argument or option)."""


class UnsafeValueError(ProvisionError):
    """A user value would have to go into a shell command but contains unsafe characters."""


class TemplateError(ProvisionError):
    """A template or expression failed to parse or render; the message names where and why."""


class NodeFault(ProvisionError):
    """What one node reported (a name it claims, a value in its facts) makes a task impossible for
    that node alone: the task fails on ``host``, the other hosts go on. An error in the user's own
    input (playbook, inventory, a variable) is a :class:`TemplateError` and refuses the whole run."""

    def __init__(self, host: str, message: str):
        self.host = host
        super().__init__(message)


_noted_faults: ContextVar[dict[str, str] | None] = ContextVar("noted_faults", default=None)


@contextmanager
def noting_faults() -> Iterator[dict[str, str]]:
    """``{host: why}`` of every node left out of a cluster-wide file for what it reported itself,
    as the files are rendered inside this block (the runner's preparation): a node outside the run
    (``--limit``) fails no task, so only this says the others' file was written without it."""
    token = _noted_faults.set({})
    try:
        yield _noted_faults.get()
    finally:
        _noted_faults.reset(token)


def note_fault(host: str, why: str) -> None:
    """Record that ``host`` was left out (see :func:`noting_faults`; a no-op outside that block)."""
    noted = _noted_faults.get()
    if noted is not None:
        noted.setdefault(host, why)
