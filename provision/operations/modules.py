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

from provision.errors import ArgumentError, ParseError
from provision.facts.registry import Fact
from provision.operations.base import Arg, FileState, Operation, OperationError, Run, StateKey, check_path, quote
from provision.operations.files import HEADER_BYTES, content_changes
from provision.operations.os_state import os_family
from provision.operations.platform import OS
from provision.templating import render_template, template_loader
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


def parse_modules(text: str) -> ModuleSystem:
    """The fact's two lines (kind, MODULEPATH); anything else is not its output."""
    lines = text.splitlines()
    kind = lines[0].strip() if lines else ""
    if kind not in KINDS or len(lines) > 2 or len(text) > 8192:
        raise ParseError("modules", f"unexpected output {shown_value(text[:80])}")
    entries = lines[1].split(":") if len(lines) > 1 else []
    return ModuleSystem(kind, tuple(e for e in entries if e and not any(ord(c) < 32 for c in e)))


MODULES_FACT = Fact("modules", (), _COMMAND, "the module command a login shell gets, and its MODULEPATH", parse_modules)


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


# Every folder a site modulefile of provision's can be in: each distribution's (the site folder
# site_folder() picks among them on a standard node) and /etc/modulefiles, where provision wrote
# before it asked the node. Read in the host's first round trip, so a converged host costs one.
KNOWN_FOLDERS = tuple(dict.fromkeys(["/etc/environment-modules/modules", "/etc/lmod/modules", *PACKAGE_FOLDER.values()]))
MARK = "written by provision setup-cluster"  # the modulefile template's header says so


def _prefix_names(args: dict) -> list[tuple[str, str]]:
    from provision.operations.conda import check_prefix, clone_name

    entries = args["anaconda"]
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "prefix" in e for e in entries):
        raise ArgumentError("conda_modules: anaconda must be the list of {prefix: ...} entries")
    return [(check_prefix(e["prefix"]), clone_name(e["prefix"])) for e in entries]


def _folders(args: dict) -> list[str]:
    if args["form"] not in ("profile", "module"):
        raise ArgumentError(f"conda_path must be profile or module, not {shown_value(args['form'])}")
    folder = check_path(args["folder"]) if args["folder"] else None
    return list(dict.fromkeys([*KNOWN_FOLDERS, *([folder] if folder else [])]))


def _modules_requests(args: dict) -> list[StateKey]:
    names = [name for _prefix, name in _prefix_names(args)]
    folders = _folders(args)
    return [MODULES, OS, *(StateKey("file", f) for f in folders), *(StateKey("file", f"{f}/{n}") for f in folders for n in names)]


def ours(state: Any) -> bool:
    """A regular file whose header says provision wrote it (an admin's own module is left alone)."""
    return (
        isinstance(state, FileState)
        and state.kind == "f"
        and state.content is not None
        and MARK.encode() in state.content[:HEADER_BYTES]
    )


def plan_modules(args: dict, current: Mapping[StateKey, Any]) -> list:
    """With ``form: module``, one modulefile per prefix in the folder the node's own ``module``
    looks in (``folder`` when given; the folder made when absent), and none of provision's left in
    the other known folders; with ``form: profile``, none of provision's left anywhere. A node
    whose MODULEPATH names a folder provision does not know of is told to set ``conda_modulefiles``."""
    prefixes, folders = _prefix_names(args), _folders(args)
    system = current.get(MODULES)
    wanted = None
    if args["form"] == "module":
        wanted = (
            check_path(args["folder"])
            if args["folder"]
            else site_folder(system if isinstance(system, ModuleSystem) else None, os_family(current.get(OS)))
        )
        if wanted not in folders:
            raise OperationError(
                f"conda_modules: this node's module command looks in {wanted}, a folder provision does not read ahead: "
                f"set conda_modulefiles: {wanted}"
            )
    changes: list = []
    for folder in folders:
        for _prefix, name in prefixes:
            path = f"{folder}/{name}"
            if folder != wanted and ours(current.get(StateKey("file", path))):
                changes.append(Run(f"rm -f -- {quote(path)}", f"remove {path}", ((StateKey("file", path), None),), (path,)))
    if wanted is not None:
        state = current.get(StateKey("file", wanted))
        if state is None:
            made = FileState("d", 0o755)
            changes.append(
                Run(
                    f"mkdir -p {quote(wanted)} && chmod 0755 {quote(wanted)}",
                    f"create folder {wanted}",
                    ((StateKey("file", wanted), made),),
                    (wanted,),
                )
            )
        elif state.kind != "d":
            raise OperationError(f"{wanted} exists and is not a folder")
        env = template_loader(args["template_dirs"] or ())
        for prefix, name in prefixes:
            item = next(e for e in args["anaconda"] if e["prefix"] == prefix or check_path(e["prefix"]) == prefix)
            content = render_template(env, args["template"], {"item": item, "anaconda": args["anaconda"]}).encode()
            path = f"{wanted}/{name}"
            changes += content_changes(
                path, content, {"owner": "root", "group": "root", "mode": 0o644}, current.get(StateKey("file", path))
            )
    return changes


OPERATIONS = {
    "conda_modules": Operation(
        "conda_modules",
        {
            "anaconda": Arg((list,), True, help="the Anaconda prefixes ({prefix: ...} entries): one modulefile each"),
            "form": Arg((str,), default="profile", help="conda_path: module writes the modulefiles, profile removes provision's"),
            "folder": Arg((str,), help="the folder of the modulefiles (default: where the node's module command looks)"),
            "template": Arg((str,), default="conda-modulefile.j2", help="the modulefile's template"),
            "template_dirs": Arg((list,), help="folders searched for it before the built-in templates"),
        },
        _modules_requests,
        plan_modules,
        doc="one modulefile per Anaconda prefix where the node's module command looks; none left elsewhere",
    ),
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
