"""YAML loading that remembers line numbers, so inventory errors can say file:line."""

from __future__ import annotations

from pathlib import Path

import yaml


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
    loader.flatten_mapping(node)
    result = LineDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise yaml.constructor.ConstructorError(None, None, "unhashable key", key_node.start_mark)
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


def _sequence(loader: _LineLoader, node: yaml.SequenceNode) -> LineList:
    result = LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


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
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else None
        raise InventoryError(str(path), line, f"YAML syntax: {error.problem or error.context}") from None
    except yaml.YAMLError as error:
        raise InventoryError(str(path), None, f"YAML: {error}") from None
