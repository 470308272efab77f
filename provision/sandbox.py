"""jinja2's sandbox with the steps that make a huge value from a short expression bounded: each
is refused at once with jinja2's ``SecurityError`` naming it, as the sandbox itself refuses a
``range`` past 100,000 items.

Each of these steps is checked before it runs, its size estimated from its arguments (never
built), against :data:`MAX_BUILT`:

- ``*`` repeating a text or a list, ``+`` joining two, ``**`` of integers (the number's bits);
- ``%`` and the ``format`` filter, ``str.format``: the widths and precisions of all conversions
  together (``%0*d`` with a huge argument, ``{:>999999999}``, a width given by an argument);
- the text methods and filters that pad or repeat: ``center``, ``ljust``, ``rjust``, ``zfill``,
  ``expandtabs``, ``replace`` (``''`` matches between every character), ``indent``, ``join``;
- ``batch`` and ``slice`` padding with ``fill_with``, ``lipsum``'s paragraphs;
- and a template's whole text output (:data:`MAX_OUTPUT`).

Not bounded (a playbook is the admin's own program, as in Ansible, and nothing a node prints is
ever a template): what adds up over many steps that are each within bounds (a ``~`` chain, a
namespace doubling in a loop, a list's ``extend``), other filters' arguments (``tojson``'s
indent, ``wordwrap``'s and ``urlize``'s strings), a command's values and a native value (a
single ``{{ expr }}``), which skip the output bound, and time: loops that print nothing.

    >>> bounded_sandbox()().from_string("{{ 'ab' * 3 }}{{ 'x'|center(5) }}").render()
    'ababab  x  '
    >>> bounded_sandbox()().from_string("{{ '%0*d' % (10 ** 9, 1) }}").render()
    Traceback (most recent call last):
    jinja2.exceptions.SecurityError: '%' would build 1000000001 characters: templates build at most 16777216
"""

from __future__ import annotations

import re
import string
from functools import lru_cache, wraps

MAX_BUILT = 1 << 24  # characters or items one step of a template may build (16 Mi); the bits of a ``**``: 1 Mi
MAX_OUTPUT = 4 * MAX_BUILT  # characters one rendering may print in all (a 4096-node page is far less)

_FIELD = re.compile(r"\{[^{}]*+\}")  # a field nested in a format spec: its width comes from an argument
_NUMBER = re.compile(r"[0-9]++")


def _refuse(what: str, size: int, unit: str = "characters"):
    from jinja2.exceptions import SecurityError

    return SecurityError(f"{what} would build {size} {unit}: templates build at most {MAX_BUILT}")


def check_binop(operator: str, left: object, right: object) -> None:
    """Refuse a ``*`` that repeats a text or list past :data:`MAX_BUILT`, an integer ``**`` whose
    result would need more than 1 Mi bits, a ``%`` whose widths pass :data:`MAX_BUILT`:
    ``{{ 'x' * 4000000000 }}`` took gigabytes and minutes, then failed with an empty MemoryError."""
    if operator == "*":
        for sequence, times in ((left, right), (right, left)):
            if isinstance(sequence, (str, bytes, list, tuple)) and isinstance(times, int) and len(sequence) * times > MAX_BUILT:
                raise _refuse("'*'", len(sequence) * times, "characters" if isinstance(sequence, str) else "items")
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and right * abs(left).bit_length() > 1 << 20:
            bits = right * abs(left).bit_length()
            from jinja2.exceptions import SecurityError

            raise SecurityError(f"'**' would build a number of about {bits} bits: templates build at most {1 << 20}")
    elif operator == "+" and isinstance(left, (str, bytes, list, tuple)) and isinstance(right, (str, bytes, list, tuple)):
        if len(left) + len(right) > MAX_BUILT:
            raise _refuse("'+'", len(left) + len(right), "characters" if isinstance(left, str) else "items")
    elif operator == "%" and isinstance(left, (str, bytes)):
        text = left if isinstance(left, str) else left.decode("latin-1")
        _check_percent("'%'", text, right if isinstance(right, tuple) else (right,))


def _percent_sizes(text: str) -> tuple[list[int], bool]:
    """The widths and precisions of every ``%`` conversion in ``text``, and whether one is given
    by an argument (``*``). One pass; a mapping key's parentheses nest, as Python reads them."""
    numbers, star, at, end = [], False, 0, len(text)
    while (at := text.find("%", at) + 1) > 0:
        if at < end and text[at] == "%":  # %% prints one %
            at += 1
            continue
        if at < end and text[at] == "(":
            depth, at = 1, at + 1
            while at < end and depth:
                depth += {"(": 1, ")": -1}.get(text[at], 0)
                at += 1
        while at < end and text[at] in "-#0 +":
            at += 1
        for first in (True, False):
            if not first:
                if at >= end or text[at] != ".":
                    break
                at += 1
            if at < end and text[at] == "*":
                star, at = True, at + 1
                continue
            digits = at
            while at < end and text[at].isdigit():
                at += 1
            if at > digits:
                numbers.append(int(text[digits:at]))
    return numbers, star


def _argument_ints(values) -> list[int]:
    """The numbers among ``values`` (and one level inside their lists and mappings), digits given
    as text too: what a ``*`` or a nested ``{}`` width may take."""
    found = []
    for value in values:
        inner = list(value.values()) if isinstance(value, dict) else list(value) if isinstance(value, (list, tuple)) else []
        for item in (value, *inner):
            if isinstance(item, bool):
                continue
            if isinstance(item, int):
                found.append(item)
            elif isinstance(item, str) and item.isdigit() and len(item) < 19:
                found.append(int(item))
    return found


def _check_percent(what: str, text: str, args) -> None:
    numbers, star = _percent_sizes(text)
    size = sum(numbers) + (sum(n for n in _argument_ints(args) if n > 0) if star else 0)
    if size > MAX_BUILT:
        raise _refuse(what, size)


def _check_format(text: str, args, kwargs) -> None:
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return  # str.format refuses it itself
    size, nested = 0, False
    for _literal, _name, spec, _conversion in fields:
        if spec:
            size += sum(int(number) for number in _NUMBER.findall(_FIELD.sub("", spec)))  # not a {1}'s 1
            nested = nested or "{" in spec
    if nested:
        size += sum(n for n in _argument_ints([*args, *kwargs.values()]) if n > 0)
    if size > MAX_BUILT:
        raise _refuse("format", size)


def _padded(what: str, width: object) -> None:
    if isinstance(width, int) and width > MAX_BUILT:
        raise _refuse(what, width)


def _replaced(what: str, text: str, old: object, new: object, count: object = -1) -> None:
    if not (isinstance(old, str) and isinstance(new, str)) or len(new) <= len(old):
        return
    found = len(text) + 1 if old == "" else text.count(old)
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    size = len(text) + found * (len(new) - len(old))
    if size > MAX_BUILT:
        raise _refuse(what, size)


def _expanded(what: str, text: str, tabsize: object = 8) -> None:
    if isinstance(tabsize, int) and text.count("\t") * tabsize > MAX_BUILT:
        raise _refuse(what, text.count("\t") * tabsize)


def _joined(what: str, separator: str, items: object) -> None:
    if isinstance(items, (str, list, tuple)):  # a text joins its characters
        size = sum(len(item) for item in items if isinstance(item, (str, bytes))) + len(separator) * max(0, len(items) - 1)
        if size > MAX_BUILT:
            raise _refuse(what, size)


def check_method(method: object, args: tuple, kwargs: dict) -> None:
    """Refuse a text method of a template (``'x'.center(10 ** 9)``) that would build past
    :data:`MAX_BUILT`; any other call passes."""
    owner = getattr(method, "__self__", None)
    if not isinstance(owner, (str, bytes)):
        return
    if isinstance(owner, bytes):
        owner = owner.decode("latin-1")
    name = getattr(method, "__name__", "")
    first = args[0] if args else None
    if name in ("center", "ljust", "rjust", "zfill"):
        _padded(name, kwargs.get("width", first))
    elif name == "expandtabs":
        _expanded(name, owner, kwargs.get("tabsize", 8 if first is None else first))
    elif name == "replace" and len(args) >= 2:
        _replaced(name, owner, *args[:3])
    elif name == "join" and args:
        _joined(name, owner, first)
    elif name in ("format", "format_map"):
        mapping = kwargs if name == "format" else first if isinstance(first, dict) else {}
        _check_format(owner, args if name == "format" else (), mapping)


def _bounded_filters(filters: dict) -> dict:
    """jinja2's filters that pad or repeat, each checked first (same signature, same flags)."""

    def guard(name, check):
        original = filters[name]
        passed = getattr(original, "jinja_pass_arg", None) is not None  # its first argument: the context

        @wraps(original)
        def checked(*args, **kwargs):
            check(*args[passed:], **kwargs)
            return original(*args, **kwargs)

        return checked

    def center(_value, width=80):
        _padded("center", width)

    def indent(value, width=4, *_flags, **_named):
        lines = str(value).count("\n") + 1
        size = lines * (len(width) if isinstance(width, str) else width if isinstance(width, int) else 0)
        if size > MAX_BUILT:
            raise _refuse("indent", size)

    def format_(value, *args, **kwargs):
        _check_percent("format", str(value), args or tuple(kwargs.values()))

    def replace(value, old, new, count=None):  # the filter replaces str(old) by str(new)
        _replaced("replace", str(value), str(old), str(new), -1 if count is None else count)

    def join(value, d="", attribute=None):
        if attribute is None and isinstance(value, (list, tuple)):
            _joined("join", str(d), [str(item) if isinstance(item, (int, float)) else item for item in value])

    def batch(_value, linecount, fill_with=None):  # pads the last batch to linecount items
        if fill_with is not None and isinstance(linecount, int) and linecount > MAX_BUILT:
            raise _refuse("batch", linecount, "items")

    def slice_(_value, slices, fill_with=None):  # makes `slices` lists, empty or not
        if isinstance(slices, int) and slices > MAX_BUILT:
            raise _refuse("slice", slices, "items")

    return {
        "center": guard("center", center),
        "indent": guard("indent", indent),
        "format": guard("format", format_),
        "replace": guard("replace", replace),
        "join": guard("join", join),
        "batch": guard("batch", batch),
        "slice": guard("slice", slice_),
    }


def _bounded_lipsum(original):
    @wraps(original)
    def lipsum(n=5, html=True, min=20, max=100):  # noqa: A002 (jinja2's own parameter names)
        if isinstance(n, int) and isinstance(max, int) and n * max * 12 > MAX_BUILT:
            raise _refuse("lipsum", n * max * 12)
        return original(n, html, min, max)

    return lipsum


def _bounded_concat(pieces) -> str:
    parts, size = [], 0
    for piece in pieces:
        size += len(piece)
        if size > MAX_OUTPUT:
            from jinja2.exceptions import SecurityError

            raise SecurityError(f"the template printed more than {MAX_OUTPUT} characters: templates print at most {MAX_OUTPUT}")
        parts.append(piece)
    return "".join(parts)


@lru_cache(maxsize=1)
def bounded_sandbox() -> type:
    """The class of provision's Jinja2 environments: jinja2's sandbox with every builder bounded."""
    from jinja2.sandbox import SandboxedEnvironment

    class BoundedSandbox(SandboxedEnvironment):
        """jinja2's sandbox, with what a template builds bounded (this module)."""

        intercepted_binops = frozenset({"*", "**", "%", "+"})
        concat = staticmethod(_bounded_concat)

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.filters.update(_bounded_filters(self.filters))
            self.globals["lipsum"] = _bounded_lipsum(self.globals["lipsum"])

        def call_binop(self, context, operator, left, right):
            check_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (jinja2's own signature)
            check_method(getattr(__obj, "__wrapped__", __obj), args, kwargs)
            return super().call(__context, __obj, *args, **kwargs)

    return BoundedSandbox
