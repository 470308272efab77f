"""Environment modules where the node's own ``module`` command looks (``conda_path: module``).

The ``modules`` fact asks the node itself: a clean bash sources ``/etc/profile`` (as a login shell
does, without root's dotfiles) and says which ``module`` it got (Lmod sets ``LMOD_CMD``;
Environment Modules, Tcl, sets ``MODULESHOME`` alone) and the default ``MODULEPATH``. The folder
for a site's modulefiles is the first ``MODULEPATH`` entry under ``/etc``: Debian's
environment-modules ``/etc/environment-modules/modules``, Debian's Lmod ``/etc/lmod/modules``,
RHEL's (either) ``/etc/modulefiles``. A node with no ``module`` command gets its distribution's
``environment-modules`` package first (the role's task before); until then, and in ``--check``,
the folder that package gives is predicted from the OS family. ``/etc/modulefiles``, what
provision wrote to before it asked the node, is on no Debian ``MODULEPATH``: ``module load``
said "Unable to locate a modulefile" there (issue 34).

    >>> site_folder(ModuleSystem("lmod", ("/etc/lmod/modules", "/usr/share/lmod/lmod/modulefiles/")), "debian")
    '/etc/lmod/modules'
    >>> site_folder(ModuleSystem("none", ()), "rhel")
    '/etc/modulefiles'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provision.errors import ParseError
from provision.facts.registry import Fact
from provision.operations.base import Operation, StateKey
from provision.operations.os_state import os_family
from provision.operations.platform import OS
from provision.text import shown_value

MODULES = StateKey("modules")
KINDS = ("lmod", "environment-modules", "none")
# Where each family's environment-modules package puts the site's folder (first under /etc on its
# MODULEPATH): Debian 12 (read from the real package, tests/test_conda_modules_cluster.py) and
# Fedora/RHEL's spec, `--with-modulepath=%{_datadir}/Modules/modulefiles:%{_sysconfdir}/modulefiles:...`.
PACKAGE_FOLDER = {"debian": "/etc/environment-modules/modules", "rhel": "/etc/modulefiles"}
# A login shell's environment, from the system's own files only (no user dotfiles), bounded in time.
_COMMAND = (
    "if command -v bash >/dev/null 2>&1; then timeout 30 env -i HOME=/ PATH=/usr/sbin:/usr/bin:/sbin:/bin bash -c "
    "'. /etc/profile >/dev/null 2>&1 </dev/null; "
    'if [ -n "${LMOD_CMD-}" ]; then echo lmod; elif [ -n "${MODULESHOME-}" ]; then echo environment-modules; '
    'else echo none; fi; printf "%s\\n" "${MODULEPATH-}"\' </dev/null || echo none; else echo none; fi'
)


@dataclass(frozen=True)
class ModuleSystem:
    """Which ``module`` a login shell on the node gets, and its default ``MODULEPATH`` entries."""

    kind: str
    path: tuple[str, ...] = ()


def parse_modules(_arg: str, text: str) -> ModuleSystem:
    """The fact's two lines (kind, MODULEPATH); anything else is not its output."""
    lines = text.splitlines()
    kind = lines[0].strip() if lines else ""
    if kind not in KINDS or len(lines) > 2 or len(text) > 8192:
        raise ParseError("modules", f"unexpected output {shown_value(text[:80])}")
    entries = lines[1].split(":") if len(lines) > 1 else []
    return ModuleSystem(kind, tuple(e for e in entries if e and not any(ord(c) < 32 for c in e)))


MODULES_FACT = Fact(
    "modules", (), lambda _arg: _COMMAND, "the module command a login shell gets, and its MODULEPATH", parse_modules
)


def site_folder(system: ModuleSystem | None, family: str | None) -> str:
    """Where a site's modulefile goes so that ``module load NAME`` finds it: the first default
    ``MODULEPATH`` entry under ``/etc`` (a literal absolute path), else the first literal one, else
    what the family's environment-modules package gives."""
    entries = [e.rstrip("/") or "/" for e in (system.path if system else ()) if e.startswith("/") and "$" not in e]
    under_etc = [e for e in entries if e.startswith("/etc/")]
    if under_etc or entries:
        return (under_etc or entries)[0]
    return PACKAGE_FOLDER.get(family or "", PACKAGE_FOLDER["rhel"])


def _result(args: dict, current: Mapping[StateKey, Any]) -> dict:
    system = current.get(MODULES)
    kind = system.kind if isinstance(system, ModuleSystem) else "none"
    return {"kind": kind, "folder": site_folder(system if isinstance(system, ModuleSystem) else None, os_family(current.get(OS)))}


OPERATIONS = {
    "module_system": Operation(
        "module_system",
        {},
        lambda _args: [MODULES, OS],
        lambda _args, _current: [],
        result=_result,
        result_requests=lambda _args: [MODULES, OS],
        doc="read which module command the node has and where its site modulefiles go (register it: kind, folder)",
    ),
}
