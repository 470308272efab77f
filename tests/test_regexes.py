"""Every regex of the package, found by walking it (never a hand list): validators do not accept a
trailing newline, and none backtracks superlinearly on what a node or user can send (issue 24,
findings 5 and 8).

- Python's ``$`` also matches before a final ``\\n``, so ``^[a-z]+$`` accepts ``"value\\n"``: a YAML
  block scalar (``address: |``) always ends in one, and the newline then splits known_hosts or
  fstab lines. A pattern anchors its end with ``\\Z`` or is used with ``fullmatch``; ``$`` only
  under ``re.MULTILINE`` (a line inside a text).
- A regex that backtracks quadratically turns 64 KB of ``password`` into half a minute of CPU
  (``_SECRET`` in operations/base.py before this fix: 33 s). Each pattern gets about 1 MiB of
  inputs built from its own literals and from strings it matches, repeated (the shape that makes
  a backtracking engine retry every start): a linear one is done in milliseconds, a quadratic one
  would take hours. The bound is generous (a guard against catastrophic backtracking, not a speed
  test); the patterns run in a child process that is killed when one overruns.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import os
import pkgutil
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import provision

PACKAGE = Path(provision.__file__).parent
FUNCTIONS = {"compile", "match", "fullmatch", "search", "sub", "subn", "findall", "finditer", "split"}
FLAGS = {name: getattr(re, name) for name in ("MULTILINE", "M", "DOTALL", "S", "IGNORECASE", "I", "VERBOSE", "X", "ASCII", "A")}
MIB = 1 << 20
BOUND_S = 60.0  # per pattern, all its inputs: linear ones take well under a second each, quadratic ones hours


def _modules() -> list:
    names = [info.name for info in pkgutil.walk_packages(provision.__path__, "provision.")]
    return [importlib.import_module(name) for name in names if name != "provision.__main__"]  # __main__ runs the CLI


def _compiled(value, where: str, found: dict) -> None:
    if isinstance(value, re.Pattern):
        found.setdefault((value.pattern, value.flags), []).append(where)
    elif isinstance(value, dict):
        for key, item in value.items():
            _compiled(item, f"{where}[{key!r}]", found)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _compiled(item, f"{where}[{index}]", found)


def _literal_flags(call: ast.Call) -> int:
    flags = 0
    for node in [*call.args[1:], *(k.value for k in call.keywords)]:
        for part in ast.walk(node):
            if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "re":
                flags |= FLAGS.get(part.attr, 0)
    return flags


def _literals(found: dict, methods: dict) -> None:
    """Regexes written inline (``re.match(r"...", text)``), found in the package's source, and
    the methods each named pattern is called with (``_LINE.match(...)``: {"_LINE": {"match"}})."""
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FUNCTIONS):
                continue
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else None
            if name != "re":
                methods.setdefault(name, set()).add(node.func.attr)
                continue
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                key = (first.value, re.compile(first.value, _literal_flags(node)).flags)
                found.setdefault(key, []).append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
                methods.setdefault(key, set()).add(node.func.attr)


def package_patterns() -> dict[tuple[str, int], list[str]]:
    """{(pattern, flags): [where]}: every compiled pattern a module of the package holds (also in
    dicts and tuples) and every literal regex passed to a ``re`` function."""
    found: dict[tuple[str, int], list[str]] = {}
    for module in _modules():
        for name, value in vars(module).items():
            _compiled(value, f"{module.__name__}.{name}", found)
    _literals(found, METHODS)
    return found


METHODS: dict = {}  # a pattern's name, or (pattern, flags) of a literal -> the re methods it is called with


def methods_of(key: tuple[str, int], names: list[str]) -> list[str]:
    """How the package runs a pattern: the methods its names are called with; "search" (the
    costliest, a try from every position) when none is seen (passed to a helper, or a dict value)."""
    used = set(METHODS.get(key, set()))
    for name in names:
        used |= METHODS.get(name.partition("[")[0].rpartition(".")[2], set())
    scanning = {"search", "sub", "subn", "findall", "finditer", "split"}
    if not used or used & scanning or name_in_dict(names):
        return ["search"] + (["match"] if "match" in used else [])
    return sorted(used & {"match", "fullmatch"}) or ["search"]


def name_in_dict(names: list[str]) -> bool:
    return any("[" in name for name in names)


def _defined_at(names: list[str]) -> str:
    """The name among ``names`` whose module assigns it (``X = re.compile``), else the first."""
    for name in names:
        module, _, attribute = name.partition("[")[0].rpartition(".")
        path = PACKAGE.parent / (module.replace(".", "/") + ".py")
        if path.is_file() and re.search(rf"^{re.escape(attribute)}\b.*=", path.read_text(), re.MULTILINE):
            return name
    return names[0]


FOUND = package_patterns()
PATTERNS = {key: _defined_at(names) for key, names in FOUND.items()}  # a pattern imported elsewhere: named where defined
IDS = [where for where in PATTERNS.values()]


def _dollars_outside_classes(pattern: str) -> list[int]:
    """Positions of ``$`` anchors (not escaped, not inside ``[...]``)."""
    positions, escaped, in_class, index = [], False, False, 0
    while index < len(pattern):
        ch = pattern[index]
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            if pattern[index + 1 : index + 2] == "^":
                index += 1
            if pattern[index + 1 : index + 2] == "]":
                index += 1  # a ']' first in a class is a literal
        elif ch == "$":
            positions.append(index)
        index += 1
    return positions


def test_the_walk_finds_the_patterns_the_issue_names():
    where = {name for names in FOUND.values() for name in names}
    for name in ("operations.base._SETTING", "operations.nfs._OPTIONS", "operations.nfs._CLIENT", "inventory.model.USER_NAME",
                 "operations.conda._CHANNEL", "launch.wrapper._SAFE", "plans.nics._IFACE",
                 "inventory.model.ADDRESS"):  # fmt: skip
        assert f"provision.{name}" in where, name
    assert any(w.startswith("provision/facts/numactl.py:") for w in where)  # an inline re.match
    assert len(PATTERNS) > 80


@pytest.mark.parametrize(("pattern", "flags"), list(PATTERNS), ids=IDS)
def test_no_dollar_anchor_outside_multiline(pattern, flags):
    """``$`` matches before a trailing newline: a whole-value pattern ends in ``\\Z`` (or is used
    with fullmatch); ``$`` is for line-by-line searches under re.MULTILINE."""
    if flags & re.MULTILINE:
        return
    assert not _dollars_outside_classes(pattern), f"{PATTERNS[(pattern, flags)]}: {pattern!r} ends with $ (use \\Z)"


def _parse(pattern: str, flags: int):
    try:
        from re import _parser as parser  # Python 3.11+
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse as parser  # type: ignore[no-redef]
    return parser.parse(pattern, flags)


_CANDIDATES = "a0A_.-:/= b,@+#~x9Zz()[]{}\t"


def _in_class(ch: str, items) -> bool:
    code, negate, hit = ord(ch), False, False
    for op, value in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            hit = hit or code == value
        elif name == "RANGE":
            hit = hit or value[0] <= code <= value[1]
        elif name == "CATEGORY":
            kind = str(value)
            test = {"DIGIT": ch.isdigit(), "WORD": ch.isalnum() or ch == "_", "SPACE": ch.isspace()}[kind.split("_")[-1]]
            hit = hit or (not test if "_NOT_" in kind else test)
    return hit != negate


def _example(items, repeat: int) -> str:
    """A string the parsed pattern ``items`` matches: each repeat ``repeat`` times within its
    bounds, the first branch, a character each class allows (checked by the caller)."""
    out = []
    for op, value in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(value))
        elif name == "NOT_LITERAL":
            out.append("a" if value != ord("a") else "b")
        elif name == "ANY":
            out.append("a")
        elif name == "IN":
            out.append(next((c for c in _CANDIDATES if _in_class(c, value)), "a"))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = value
            out.append(_example(sub, repeat) * max(low, min(repeat, high)))
        elif name == "SUBPATTERN":
            out.append(_example(value[-1], repeat))
        elif name == "ATOMIC_GROUP":
            out.append(_example(value, repeat))
        elif name == "BRANCH":
            out.append(_example(value[1][0], repeat))
    return "".join(out)


def examples(pattern: str, flags: int) -> list[str]:
    """Strings ``pattern`` matches whole: its shortest form and one with every repeat pumped."""
    compiled = re.compile(pattern, flags)
    found = [_example(_parse(pattern, flags), repeat) for repeat in (1, 40)]
    return [text for text in dict.fromkeys(found) if compiled.fullmatch(text)]


def _whole_value(pattern: str, flags: int) -> bool:
    """Anchored at both ends (a validator of a whole value), not a line search."""
    items = list(_parse(pattern, flags))
    return bool(items) and not flags & re.MULTILINE and str(items[0][0]) == "AT" and str(items[-1][0]) == "AT"


WHOLE = [key for key in PATTERNS if _whole_value(*key)]


def test_every_validator_has_an_example():
    missing = [PATTERNS[key] for key in WHOLE if not examples(*key)]
    assert not missing, f"no example generated for {missing}: extend _example"


@pytest.mark.parametrize(("pattern", "flags"), WHOLE, ids=[PATTERNS[k] for k in WHOLE])
def test_validators_refuse_a_value_with_a_trailing_newline(pattern, flags):
    """What a pattern accepts, followed by ``\\n`` (a YAML block scalar's end), is refused."""
    compiled = re.compile(pattern, flags)
    for value in examples(pattern, flags):
        if compiled.fullmatch(value + "\n"):
            continue  # the pattern's own language holds a trailing newline (DOTALL free text): no validator
        assert compiled.match(value + "\n") is None, f"{PATTERNS[(pattern, flags)]} accepts {value + chr(10)!r}"


# -- linear time ---------------------------------------------------------------------------------------


def _literal_runs(pattern: str, flags: int) -> list[str]:
    """The runs of literal characters a pattern names (``pass``, ``-----BEGIN ``, ``[``)."""
    runs: list[str] = []

    def walk(items) -> None:
        current = ""
        for op, value in items:
            name = str(op)
            if name == "LITERAL":
                current += chr(value)
                continue
            if current:
                runs.append(current)
                current = ""
            if name in ("SUBPATTERN",):
                walk(value[-1])
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                walk(value[2])
            elif name == "BRANCH":
                for branch in value[1]:
                    walk(branch)
            elif name in ("ASSERT", "ASSERT_NOT"):
                walk(value[1])
            elif name == "ATOMIC_GROUP":
                walk(value)
        if current:
            runs.append(current)

    walk(_parse(pattern, flags))
    return list(dict.fromkeys(r for r in runs if r))


def _pieces(pattern: str, flags: int) -> list[str]:
    """What the attack inputs repeat: the pattern's longest literals, strings it matches whole and
    their first halves (an opening without its close), and the usual filler characters."""
    literals = sorted(_literal_runs(pattern, flags), key=len, reverse=True)[:3]
    samples = [part for text in examples(pattern, flags)[-1:] for part in (text, text[: max(len(text) // 2, 1)])]
    return [p for p in dict.fromkeys([*literals, *samples, " ", "\n", "a", "0"]) if p]


WORKER = r"""
import json, re, sys
MIB = 1 << 20
for line in sys.stdin:
    index, pattern, flags, pieces, methods = json.loads(line)
    compiled = re.compile(pattern, flags)
    print("start", index, flush=True)
    for piece in pieces:
        text = piece * max(MIB // len(piece), 1) + "\x00"  # a mebibyte of it, and an end it cannot match
        for method in methods:
            getattr(compiled, method)(text)
    print("done", index, flush=True)
"""


def _run_all(specs: list[tuple[int, str, int, list[str], list[str]]]) -> dict[int, str]:
    """Run every spec in one child; {index: why} for those past :data:`BOUND_S` (the child is
    killed and restarted after the slow one)."""
    slow: dict[int, str] = {}
    pending = list(specs)
    while pending:
        feed = "".join(json.dumps(spec) + "\n" for spec in pending).encode()
        child = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        assert child.stdin and child.stdout
        writer = threading.Thread(target=_feed, args=(child.stdin, feed), daemon=True)
        writer.start()
        running, started, buffered = None, time.monotonic(), b""
        finished: set[int] = set()
        while True:
            lines = buffered.split(b"\n")
            buffered = lines.pop()
            for line in lines:
                word, index = line.decode().split()
                running, started = (int(index), time.monotonic()) if word == "start" else (None, time.monotonic())
                if word == "done":
                    finished.add(int(index))
            limit = BOUND_S if running is not None else 60  # 60 s: the child starting up, or taking the next
            ready, _, _ = select.select([child.stdout], [], [], max(limit - (time.monotonic() - started), 0))
            chunk = os.read(child.stdout.fileno(), 65536) if ready else None
            if chunk:
                buffered += chunk
                continue
            if running is not None:
                slow[running] = f"no result after {BOUND_S:.0f} s" if chunk is None else "the worker died"
            child.kill()
            child.wait()
            break
        if running is None and len(finished) < len(pending):
            raise AssertionError(f"the regex worker stopped after {len(finished)} of {len(pending)} patterns")
        pending = [s for s in pending if s[0] not in finished and s[0] not in slow]
    return slow


def _feed(pipe, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError):
        pipe.write(data)
        pipe.close()


def test_every_regex_runs_in_linear_time_on_a_mebibyte_of_its_worst_case():
    keys = list(PATTERNS)
    specs = [(i, *key, _pieces(*key), methods_of(key, FOUND[key])) for i, key in enumerate(keys)]
    slow = _run_all(specs)
    named = {PATTERNS[keys[index]]: why for index, why in slow.items()}
    assert not named, f"superlinear on 1 MiB: {named}"
