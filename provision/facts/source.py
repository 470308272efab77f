"""A fact source: the capture name, the tools it needs and the shell step that prints it.

Each parser module declares its sources next to its parser (pyinfra's model: a fact is the
command that gathers it plus a pure parser); :mod:`provision.probe.gather` assembles the script from
them and :mod:`provision.facts.derive` looks captures up by them. This module imports nothing
of provision's, so both sides can import it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One capture: its file name, the tools it needs, the POSIX sh it runs, what it is for.

    ``script`` is a fixed constant (never a user value). With ``needs`` empty the step runs
    unconditionally (builtins and files only); otherwise a missing tool gives exit 127.
    """

    name: str
    needs: tuple[str, ...]
    script: str
    describe: str

    def __str__(self) -> str:
        return self.name
