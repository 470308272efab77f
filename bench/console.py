"""The commands a benchmark starts: the console scripts installed beside the interpreter that runs
it (the bench venv's ``provision``, ``ansible``, ``clush``), not a shim found first on PATH such as
pyenv's, which would add its own start-up time and might run another install.

    >>> tool("no-such-command-here")
    'no-such-command-here'
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def tool(name: str) -> str:
    """``name`` beside this interpreter, else the one on PATH, else ``name`` itself (the start then
    fails naming it; ``shutil.which(tool(name))`` is None when it is nowhere)."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name) or name
