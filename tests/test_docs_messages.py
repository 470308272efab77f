"""Issue 34, item 5: every message a built-in role can print has its entry in the troubleshooting
page's "Messages of the roles", and every entry there is a message the code prints.

The messages are read from the code itself (its syntax tree): each refusal (``OperationError``,
``ArgumentError`` and the errors derived from them) raised in the modules of the operations the
shipped playbooks use (and the helpers every operation shares: arguments, paths, OS families,
key lines), and each failing line of the checks after a run. A message is on the page when one
code span there holds each of its fixed parts, in order (its values are examples on the page)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import provision
from provision.operations import OPERATIONS
from provision.playbook.model import load_playbook
from provision.resources import resource_dir

PACKAGE = Path(provision.__file__).resolve().parent
PAGE = Path(__file__).resolve().parent.parent / "docs" / "how-to" / "troubleshooting.md"
ERRORS = {"OperationError", "ArgumentError", "PasswordFileError"}
SHARED = ("provision.operations.base", "provision.operations.platform", "provision.operations.authorized_keys")
CHECKS = ("provision.checks.roles", "provision.checks.ssh_pairs")
SHOWN = ("provision.cli.setup_view",)  # what the run prints around the checks' lines (entries may quote it)


def role_modules() -> list[str]:
    """The modules of the operations the shipped playbooks' tasks use (a template is a file)."""
    names = set()
    for play in load_playbook(resource_dir("playbooks") / "setup-cluster.yml"):
        for task in (*play.tasks, *play.handlers):
            names.add("file" if task.op == "template" else task.op)
    return sorted({OPERATIONS[name].plan.__module__ for name in names})


def parts(node: ast.AST) -> list[str | None] | None:
    """A message's text as its fixed parts (None for each value put in), or None when it is not
    built from text (a variable, a call)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value if isinstance(v, ast.Constant) else None for v in node.values]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = parts(node.left), parts(node.right)
        if left is None and right is None:
            return None
        return (left or [None]) + (right or [None])
    return None


def fragments(message: list[str | None]) -> list[str]:
    """The fixed parts that say something (three characters or more), whitespace collapsed."""
    text = "".join(part if part is not None else "\x00" for part in message)
    return [" ".join(piece.split()) for piece in text.split("\x00") if len(piece.strip()) >= 3]


def tree(module: str) -> ast.AST:
    return ast.parse((PACKAGE.parent / (module.replace(".", "/") + ".py")).read_text())


def messages() -> dict[str, list[str]]:
    """``module:line`` -> the fixed parts of each message a role can print."""
    found = {}
    for module in (*role_modules(), *SHARED):
        for node in ast.walk(tree(module)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ERRORS and node.args:
                message = parts(node.args[0])
                if message is not None and fragments(message):
                    found[f"{module}:{node.lineno}"] = fragments(message)
    for module in CHECKS:
        for node in ast.walk(tree(module)):
            name = getattr(node.func, "id", None) if isinstance(node, ast.Call) else None
            failing = (
                name == "SummaryLine"
                and len(node.args) >= 4
                and not (isinstance(node.args[3], ast.Constant) and node.args[3].value is True)
            )
            failing |= name == "PairResult" and len(node.args) >= 5
            if failing:
                message = parts(node.args[2] if name == "SummaryLine" else node.args[4])
                if message is not None and fragments(message):
                    found[f"{module}:{node.lineno}"] = fragments(message)
        for node in ast.walk(tree(module)):  # the pair check's own words (ssh exit N, no answer)
            if isinstance(node, ast.IfExp) and module.endswith("ssh_pairs"):
                for branch in (node.body, node.orelse):
                    message = parts(branch)
                    if message is not None and fragments(message):
                        found[f"{module}:{branch.lineno}"] = fragments(message)
    return found


def printed_texts() -> list[list[str]]:
    """Every text the role modules, the checks and the run's printing can build (for the reverse check)."""
    texts = []
    for module in (*role_modules(), *SHARED, *CHECKS, *SHOWN):
        for node in ast.walk(tree(module)):
            message = parts(node) if isinstance(node, (ast.JoinedStr, ast.Constant, ast.BinOp)) else None
            if message is not None and fragments(message):
                texts.append(fragments(message))
    return texts


def entries() -> list[str]:
    """The code spans of the entries (the lines a definition explains) of "Messages of the roles"."""
    text = PAGE.read_text()
    section = text.split("## Messages of the roles\n", 1)[1].split("\n## ", 1)[0]
    section = section[section.index("\n### ") :]  # the entries, after the section's introduction
    spans = []
    for line in section.splitlines():
        if line.startswith((":", " ", "#")) or "`" not in line:
            continue
        spans += [" ".join(m.group(2).split()) for m in re.finditer(r"(`{1,2})(.+?)\1", line)]
    return spans


def holds(span: str, fixed: list[str]) -> bool:
    """Each fixed part in ``span``, in order."""
    position = 0
    for piece in fixed:
        found = span.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def test_every_message_a_role_can_print_is_on_the_troubleshooting_page():
    spans = entries()
    found = messages()
    assert len(found) > 80 and len(spans) > 80, (len(found), len(spans))  # a reader that reads nothing fails
    lacking = [f"{where}: {' ... '.join(fixed)}" for where, fixed in found.items() if not any(holds(s, fixed) for s in spans)]
    assert not lacking, "messages without an entry in docs/how-to/troubleshooting.md (Messages of the roles):\n" + "\n".join(
        lacking
    )


def test_every_entry_is_a_message_the_code_prints():
    texts = printed_texts()
    stale = [span for span in entries() if not any(holds(span, fixed) for fixed in texts)]
    assert not stale, "entries no code prints (update or remove them):\n" + "\n".join(stale)
