"""YAML loading that remembers line numbers, so inventory errors can say file:line.

Every YAML file provision reads (inventories, group_vars/host_vars, -e @FILE, playbooks) is
loaded here, with two rules YAML itself leaves open:

- a key written twice in one mapping is an error naming both lines (PyYAML keeps the last one
  silently); a key that only overrides one merged in with ``<<: *anchor`` is not a duplicate;
- aliases may not expand the document past :data:`MAX_EXPANDED` values: a chain of anchors
  (``b: &b [*a, *a, ...]``, nine deep) loads as shared references in no time, but every reader that
  walks the values (templating, a ``--syntax-check``) would then walk 9^9 of them;
- values may not nest more than :data:`MAX_DEPTH` deep: PyYAML builds a document, and provision's
  readers walk it, by recursion, and 300 levels of ``[`` (libyaml stops at 1000) ended in a
  RecursionError's traceback; provision's own playbooks nest 8 deep.
"""

from __future__ import annotations

from pathlib import Path

import yaml

MAX_EXPANDED = 1_000_000  # values in a document, each alias counted as a copy of what it names
MAX_DEPTH = 64  # values one in another, the document itself the first (aliases expanded)


class LineDict(dict):
    """A dict from YAML that knows its own line and each key's line (1-based)."""

    line: int = 0
    key_lines: dict


class LineList(list):
    """A list from YAML that knows its own line and each item's line (1-based)."""

    line: int = 0
    item_lines: list


class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml when present: ~10x faster, same marks
    pass


def _mapping(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    written = {id(key) for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge"}  # not merged in by <<
    loader.flatten_mapping(node)
    result = LineDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    first: dict = {}  # key -> the line it was written on in this mapping
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise yaml.constructor.ConstructorError(None, None, "unhashable key", key_node.start_mark)
        line = key_node.start_mark.line + 1
        if id(key_node) in written:
            if key in first:
                from provision.text import shown_value

                raise yaml.constructor.ConstructorError(
                    None, None, f"key {shown_value(key)} written twice (first on line {first[key]})", key_node.start_mark
                )
            first[key] = line
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _sequence(loader: _LineLoader, node: yaml.SequenceNode) -> LineList:
    result = LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _too_big(root: yaml.Node) -> tuple[str, yaml.Node] | None:
    """(why, the innermost node that alone is over :data:`MAX_EXPANDED`, or the first one past
    :data:`MAX_DEPTH`) when the document's aliases expand it past the bound, an alias names a
    value that holds it, or its values nest too deep; None when it is within. Iterative (a deep
    document is no recursion problem), each node's size and height counted once (linear in the
    composed document)."""
    sizes: dict[int, int] = {}
    heights: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            open_nodes.discard(id(node))
            children = _children(node)
            sizes[id(node)] = min(1 + sum(sizes[id(child)] for child in children), MAX_EXPANDED + 1)
            heights[id(node)] = 1 + max((heights[id(child)] for child in children), default=0)
            continue
        if id(node) in sizes:
            continue
        if id(node) in open_nodes:  # a recursive alias (&a [*a]): no finite expansion
            return "an alias names a value that holds it (no end to its expansion)", node
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    if heights[id(root)] > MAX_DEPTH:
        node = root
        for _ in range(MAX_DEPTH):  # down the deepest values to the first one past the bound
            node = max(_children(node), key=lambda child: heights[id(child)])
        return f"values nested more than {MAX_DEPTH} deep", node
    if sizes[id(root)] <= MAX_EXPANDED:
        return None
    node = root
    while True:  # down to the innermost value over the bound: where the aliases pile up
        bigger = next((child for child in _children(node) if sizes.get(id(child), 0) > MAX_EXPANDED), None)
        if bigger is None:
            return f"aliases expand this value to more than {MAX_EXPANDED} values (an alias chain?)", node
        node = bigger


def _load(text: str):
    loader = _LineLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        over = _too_big(root)
        if over is not None:
            raise yaml.constructor.ConstructorError(None, None, over[0], over[1].start_mark)
        return loader.construct_document(root)
    finally:
        loader.dispose()


def load_yaml_with_lines(path: Path):
    """Load ``path``; mappings become :class:`LineDict`, sequences :class:`LineList`.

    Raises ``InventoryError`` with file:line on a YAML syntax error or an unreadable file.
    """
    from provision.errors import InventoryError

    try:
        text = Path(path).read_text()
    except OSError as error:
        raise InventoryError(str(path), None, f"cannot read: {error.strerror}") from None
    try:
        return _load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else None
        raise InventoryError(str(path), line, f"YAML syntax: {error.problem or error.context}") from None
    except yaml.YAMLError as error:
        raise InventoryError(str(path), None, f"YAML: {error}") from None
