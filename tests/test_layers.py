"""The package's layers read as the data flow and never import upward; no module imports itself
back through another (no cycle). Every ``import provision...`` in the source counts, also those
inside functions: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import provision

ROOT = Path(provision.__file__).resolve().parent
LAYERS = provision.LAYERS  # stated once, in provision/__init__.py


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


# -- the CLI parses and prints ------------------------------------------------------------------
# What is checked, statically (the AST of provision/cli/), and what is not:
#
# 1. No module of provision/cli/ imports a command module (a module named in
#    provision.cli.COMMANDS) other than itself: a command never reaches into another's code (the
#    doctor gate of `launch` imported cli.doctor_cmd).
# 2. On every path through a command function (a function decorated ``@commands.command``), at
#    most one call goes below the CLI: a name imported from a provision module outside
#    provision.cli, called; a call to a function of the same module counts as the calls on its
#    own worst path (so a helper cannot hide a second call), a call inside a loop counts twice,
#    an ``if``'s branches are alternatives (``--check FILE`` is another path than the plan), a
#    ``return``/``raise`` ends a path. A service object (a class from below the CLI, built in the
#    command) counts once more for each method called on it: a flow driven step by step from the
#    CLI (setup-cluster called ClusterSetup's seven methods in order) is several calls. Not
#    counted: dataclasses built as a request, exceptions, and the base layer's text escaping,
#    errors and defaults (provision.text/errors/defaults), which every printed line uses. Calls
#    to methods of other objects (the result a service returned, rich's console) are not
#    followed: a static check cannot type them.
# 3. The CLI's printing modules (every module of provision/cli/ that is not a command module:
#    output, options, config, the *_view modules) never call a function that a command calls as
#    its one service: printing is given results, it does not fetch them.
#
# Not checked: that a printing module makes no decision (no static check can tell a decision
# from a format); that the one call is the right service.

import importlib  # noqa: E402
from dataclasses import is_dataclass  # noqa: E402

from provision.cli import COMMANDS  # noqa: E402

CLI = ROOT / "cli"
COMMAND_MODULES = {entry.module for entry in COMMANDS}
NOT_COUNTED = ("provision.text", "provision.errors", "provision.defaults")


def _below_cli_names(tree: ast.AST) -> dict[str, tuple[str, str]]:
    """``{local name: (module, attribute)}`` of every name the module imports from provision below the CLI."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("provision"):
            if node.module.startswith("provision.cli") or node.module == "provision":
                continue
            for alias in node.names:
                names[alias.asname or alias.name] = (node.module, alias.name)
    return names


def _below(module: str, attribute: str):
    """The object ``module.attribute`` when calling it is a call below the CLI that counts (see the
    header), else None."""
    if module in NOT_COUNTED:
        return None
    target = getattr(importlib.import_module(module), attribute, None)
    if isinstance(target, type) and (is_dataclass(target) or issubclass(target, BaseException)):
        return None
    return target if callable(target) else None


class _Paths:
    """The most calls below the CLI on any path through a function (see the header, rule 2)."""

    def __init__(self, tree: ast.Module):
        self.below = {name: where for name, where in _below_cli_names(tree).items() if _below(*where) is not None}
        classes = {name for name, where in self.below.items() if isinstance(_below(*where), type)}
        self.functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        self.objects = {  # names bound to a service object built in the module: its methods count
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in classes
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        self.done: dict[str, int] = {}
        self.calls: list[str] = []  # every counted callee met, for the message and rule 3

    def function(self, name: str) -> int:
        if name not in self.done:
            self.done[name] = 0  # a recursive helper counts once
            cont, term = self.block(self.functions[name].body)
            self.done[name] = max(v for v in (cont, term, 0) if v is not None)
        return self.done[name]

    def expression(self, node: ast.AST) -> int:
        count = 0
        for child in ast.walk(node):
            if not isinstance(child, ast.Call):
                continue
            if isinstance(child.func, ast.Attribute) and isinstance(child.func.value, ast.Name):
                if child.func.value.id in self.objects:
                    self.calls.append(f"{child.func.value.id}.{child.func.attr}")
                    count += 1
                continue
            if not isinstance(child.func, ast.Name):
                continue
            name = child.func.id
            if name in self.below:
                self.calls.append(".".join(self.below[name]))
                count += 1
            elif name in self.functions:
                count += self.function(name)
        return count

    def block(self, statements: list[ast.stmt]) -> tuple[int | None, int | None]:
        """(most calls on a path that falls through the block, most on a path that ended in it)."""
        cont: int | None = 0
        term: int | None = None
        for statement in statements:
            if cont is None:
                break
            s_cont, s_term = self.statement(statement)
            if s_term is not None:
                term = max(term or 0, cont + s_term)
            cont = None if s_cont is None else cont + s_cont
        return cont, term

    def statement(self, node: ast.stmt) -> tuple[int | None, int | None]:
        if isinstance(node, ast.If):
            test = self.expression(node.test)
            return self._either(test, self.block(node.body), self.block(node.orelse))
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            head = self.expression(node.iter if not isinstance(node, ast.While) else node.test)
            body = self.block(node.body)
            inside = max(v for v in (*body, 0) if v is not None)
            return head + 2 * inside, (head + 2 * inside if body[1] is not None else None)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            head = sum(self.expression(item.context_expr) for item in node.items)
            cont, term = self.block(node.body)
            return (None if cont is None else head + cont), (None if term is None else head + term)
        if isinstance(node, ast.Try):
            cont, term = self.block(node.body)
            most = max(v for v in (cont, term, 0) if v is not None)
            for handler in node.handlers:
                h_cont, h_term = self.block(handler.body)
                if h_cont is not None:
                    cont = max(cont or 0, most + h_cont)
                if h_term is not None:
                    term = max(term or 0, most + h_term)
            final = self.block(node.finalbody)[0] or 0
            return (None if cont is None else cont + final), (None if term is None else term + final)
        if isinstance(node, (ast.Return, ast.Raise)):
            return None, self.expression(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):  # a callback it hands on: counted where defined
            cont, term = self.block(node.body)
            return max(v for v in (cont, term, 0) if v is not None), None
        return self.expression(node), None

    @staticmethod
    def _either(test: int, first, second) -> tuple[int | None, int | None]:
        conts = [test + v for v in (first[0], second[0]) if v is not None]
        terms = [test + v for v in (first[1], second[1]) if v is not None]
        return (max(conts) if conts else None), (max(terms) if terms else None)


def _command_functions(tree: ast.Module) -> list[str]:
    def is_command(decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return isinstance(target, ast.Attribute) and target.attr == "command"

    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and any(map(is_command, n.decorator_list))]


def _cli_modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text()) for path in sorted(CLI.glob("*.py")) if path.stem != "__init__"}


def test_no_cli_module_imports_another_commands_module():
    crossing = []
    for name in _cli_modules():
        for imported in imports_of(CLI / f"{name}.py"):
            other = imported.removeprefix("provision.cli.")
            if imported.startswith("provision.cli.") and other in COMMAND_MODULES and other != name:
                crossing.append(f"provision.cli.{name} imports {imported}")
    assert crossing == []


def _services() -> tuple[dict[str, list[str]], set[str]]:
    """Each command function's calls below the CLI on its worst path, and every callee met."""
    found, callees = {}, set()
    for name, tree in _cli_modules().items():
        if name not in COMMAND_MODULES:
            continue
        paths = _Paths(tree)
        for command in _command_functions(tree):
            paths.calls = []
            most = paths.function(command)
            found[f"{name}.{command}"] = (most, sorted(set(paths.calls)))
            callees |= set(paths.calls)
    return found, callees


def test_each_command_makes_one_call_below_the_cli():
    found, _ = _services()
    assert len(found) >= len(COMMANDS), found  # every command function was found (inventory has three)
    more = {command: calls for command, (most, calls) in found.items() if most > 1}
    assert more == {}


def test_printing_modules_never_call_a_commands_service():
    _, services = _services()
    fetching = []
    for name, tree in _cli_modules().items():
        if name in COMMAND_MODULES:
            continue
        below = _below_cli_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in below:
                callee = ".".join(below[node.func.id])
                if callee in services:
                    fetching.append(f"provision.cli.{name} calls {callee}")
    assert fetching == []
