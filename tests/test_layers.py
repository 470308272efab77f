"""The package's layers read as the data flow and never import upward; no module imports itself
back through another (no cycle). Every ``import provision...`` in the source counts, also those
inside functions: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import provision

ROOT = Path(provision.__file__).resolve().parent
# Lowest first: a module may import from its own layer and the layers before it.
LAYERS = [
    {"provision", "provision.errors", "provision.defaults", "provision.resources", "provision.yaml_lines", "provision.files"},
    {"provision.inventory"},
    {"provision.transport"},
    {"provision.facts"},
    {"provision.probe"},
    {"provision.plans"},
    {"provision.templating"},
    {"provision.operations"},
    {"provision.playbook"},
    {"provision.engine"},
    {"provision.checks", "provision.launcher", "provision.doctor", "provision.cluster_setup"},
    {"provision.cli", "provision.__main__"},
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    best = None
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > len(best[1])):
                best = (index, name)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def _runtime_nodes(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:`` (annotations only, never imported)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            yield from (n for child in node.orelse for n in _runtime_nodes_of(child))
            continue
        yield node
        yield from _runtime_nodes(node)


def _runtime_nodes_of(node: ast.AST):
    yield node
    yield from _runtime_nodes(node)


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("provision")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("provision"):
            found.add(node.module)
            # "from provision.x import y" where y is a module
            for alias in node.names:
                if (ROOT.parent / (node.module + "." + alias.name).replace(".", "/")).with_suffix(".py").exists():
                    found.add(f"{node.module}.{alias.name}")
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(path): imports_of(path) for path in ROOT.rglob("*.py")}


def test_no_module_imports_a_higher_layer():
    upward = []
    for module, imported in graph().items():
        for target in imported:
            if target != "provision" and layer_of(target) > layer_of(module):
                upward.append(f"{module} imports {target}")
    assert upward == []


def test_no_import_cycle_between_modules():
    edges = graph()
    modules = set(edges)
    # package __init__ files that only re-export are edges too; a cycle is a path back to the start
    cycles = []
    state: dict[str, int] = {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        for target in sorted(edges.get(module, ())):
            if target not in modules or target == module or module.startswith(target + "."):
                continue  # a package's own __init__ is imported by every module in it
            if state.get(target) == 1:
                loop = stack[stack.index(target) :] + [target] if target in stack else [module, target]
                cycles.append(" -> ".join(loop))
            elif state.get(target) is None:
                visit(target, stack + [target])
        state[module] = 2

    for module in sorted(modules):
        if state.get(module) is None:
            visit(module, [module])
    assert cycles == []
