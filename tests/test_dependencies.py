"""Every third-party package the code imports is declared in pyproject.toml.

A package that is only there because another one happens to pull it in today (click via old
typer releases, invoke via fabric) breaks a fresh `pip install .` the day that changes.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parent.parent


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(requirements: list[str]) -> set[str]:
    return {_normalise(re.match(r"[A-Za-z0-9._-]+", requirement).group(0)) for requirement in requirements}


def _declared(*extras: str) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = _requirement_names(project["dependencies"])
    for extra in extras:
        names |= _requirement_names(project["optional-dependencies"][extra])
    return names


def _imports(folder: Path, local: set[str]) -> dict[str, str]:
    """{top-level module: first file importing it} for every absolute, non-stdlib import."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def _undeclared(imports: dict[str, str], declared: set[str]) -> list[str]:
    providers = packages_distributions()
    missing = []
    for module, where in sorted(imports.items()):
        if _normalise(module) in declared:  # declared under its own name (tomli: only on Python 3.10)
            continue
        distributions = {_normalise(d) for d in providers.get(module, [])}
        if not distributions & declared:
            missing.append(f"{module} (imported by {where}; provided by {sorted(distributions) or 'nothing installed'})")
    return missing


def test_package_imports_are_declared_dependencies():
    imports = _imports(ROOT / "provision", {"provision"})
    assert {"typer", "fabric", "yaml"} <= set(imports)  # the scan sees the real imports
    assert _undeclared(imports, _declared()) == []


def test_test_imports_are_declared_in_the_test_extra():
    local = {path.stem for path in (ROOT / "tests").glob("*.py")} | {"provision"}
    imports = _imports(ROOT / "tests", local)
    assert {"pytest", "hypothesis"} <= set(imports)
    # tests/test_docs_reference.py builds the site with the docs extra (tests/run.sh installs both)
    assert _undeclared(imports, _declared("test", "docs")) == []


def test_documentation_hook_imports_are_declared_in_the_docs_extra():
    imports = _imports(ROOT / "docs" / "hooks", {"provision"})
    assert _undeclared(imports, _declared("docs")) == []
