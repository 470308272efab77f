"""Jinja2 for playbooks and operations (the templates layer, below both): sandboxed,
StrictUndefined, native values for ``"{{ expr }}"``, values kept out of shell code (a command's
values are passed as shell variables, never as text), and ``when:`` expressions without ``eval``."""

from __future__ import annotations

import contextvars
import re
import shlex
import traceback
from collections.abc import Iterable
from functools import lru_cache, wraps
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from provision.errors import TemplateError
from provision.resources import jinja_environment, resource_dir
from provision.templating.filters import FILTERS
from provision.templating.shell import VALUES_END, VARIABLE, place_values
from provision.text import shown_value

_SINGLE = re.compile(r"^\{\{(?P<expr>(?:(?!\}\}).)*)\}\}\Z", re.DOTALL)


def _quote(value: Any) -> str:
    return shlex.quote(str(value))


def _environment(**extra) -> SandboxedEnvironment:
    env = jinja_environment(**extra)
    env.filters["quote"] = _quote
    env.filters.update(FILTERS)
    return env


ENV = _environment()
_VALUES: contextvars.ContextVar[list | None] = contextvars.ContextVar("_VALUES", default=None)


def _collect(value: Any) -> Any:
    # Each ``{{ }}`` of a command renders as a marker; the value itself is kept aside.
    values = _VALUES.get()
    if values is None or isinstance(value, jinja2.runtime.Undefined):
        return value
    values.append("" if value is None else str(value))
    return f"\x00{len(values)}\x00"


SHELL_ENV = _environment(finalize=_collect)


@lru_cache(maxsize=4096)
def variables_in(text: str) -> frozenset[str]:
    """The top-level variable names a template string refers to (jinja2's
    ``meta.find_undeclared_variables``).

    meta generates the template's code to find them, and setup-cluster reads every playbook value
    and template each run; a template that sets no name of its own (no ``set``, ``for``,
    ``macro``, ``with``, ``import``, call block or namespace) reads exactly the names in it, so
    those are walked instead (2-3x faster; the same answer, tested), the others asked of meta.

    >>> sorted(variables_in("{{ users|map(attribute='name')|join(loop) }}"))
    ['loop', 'users']
    >>> sorted(variables_in("{% set x = x|default(1) %}{% for u in users %}{{ u }}{% endfor %}{{ x }}"))
    ['users', 'x']
    """
    from jinja2 import meta, nodes

    try:
        tree = ENV.parse(text)
    except jinja2.TemplateSyntaxError:
        return frozenset()
    scoped = (nodes.Assign, nodes.AssignBlock, nodes.For, nodes.Macro, nodes.CallBlock, nodes.With)
    if any(True for _ in tree.find_all((*scoped, nodes.Import, nodes.FromImport, nodes.NSRef, nodes.Scope))):
        return frozenset(meta.find_undeclared_variables(tree))
    return frozenset(name.name for name in tree.find_all(nodes.Name))


@lru_cache(maxsize=4096)
def fields_in(text: str) -> frozenset[str]:
    """The attribute and key names a template string reads of some value (``item.conda_clone``,
    ``item['name']``, ``selectattr('jupyter_port')``, ``map(attribute='prefix')``): every
    attribute name and every constant string in it, a superset of the fields it reads."""
    from jinja2 import nodes

    try:
        tree = ENV.parse(text)
    except jinja2.TemplateSyntaxError:
        return frozenset()
    names = {node.attr for node in tree.find_all(nodes.Getattr)}
    names |= {node.value for node in tree.find_all(nodes.Const) if isinstance(node.value, str)}
    return frozenset(names)


@lru_cache(maxsize=4096)
def _compiled(text: str, shell: bool) -> jinja2.Template:
    return (SHELL_ENV if shell else ENV).from_string(text)


OUT_OF_MEMORY = "its value is too large to build (out of memory)"


def _memory_bounded(function):
    """A MemoryError (its message is empty) becomes a :class:`TemplateError` that says what
    happened; the caller adds the file, task and host."""

    @wraps(function)
    def bounded(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except MemoryError:
            raise TemplateError(OUT_OF_MEMORY) from None

    return bounded


@_memory_bounded
def render_value(value: Any, context: dict, *, shell: bool = False) -> Any:
    """Render every string inside ``value`` (dicts and lists walked). A string that is exactly one
    ``{{ expression }}`` keeps the expression's native type (a list stays a list). With
    ``shell``, a string is a shell command: see :func:`render_command`."""
    if isinstance(value, dict):
        return {key: render_value(item, context, shell=shell) for key, item in value.items()}
    if isinstance(value, list):
        return [render_value(item, context, shell=shell) for item in value]
    if not isinstance(value, str) or ("{{" not in value and "{%" not in value):
        return value
    if shell:
        return render_command(value, context)
    single = _SINGLE.match(value.strip())
    if single:
        result = compile_expression(single.group("expr"))(**context)
        if isinstance(result, jinja2.runtime.Undefined):
            result._fail_with_undefined_error()
        return result
    return _compiled(value, False).render(context)


@_memory_bounded
def render_command(text: str, context: dict) -> str:
    """Render a shell command so that no value can become shell code, whatever the quotes around
    it: every ``{{ }}`` becomes a reference to a shell variable (``"${_pv1}"``), assigned first
    from the shell-quoted value, so the value is one word and is never parsed. A value inside
    quotes or a here-document is refused (:class:`TemplateError`): there it could end the quotes,
    or be run by a nested shell (``sh -c "... {{ x }}"``). A value inside ``$(...)``, even within
    double quotes, is a word of that command and allowed."""
    values: list[str] = []
    token = _VALUES.set(values)
    try:
        rendered = _compiled(text, True).render(context)
    finally:
        _VALUES.reset(token)
    if not values:
        return rendered
    body = place_values(rendered, values)
    assignments = [f"{VARIABLE.format(n)}={shlex.quote(value)}" for n, value in enumerate(values, 1)]
    return "\n".join([*assignments, VALUES_END, body])


@lru_cache(maxsize=1024)
def compile_expression(expression: str):
    """A compiled (sandboxed) Jinja2 expression; raises :class:`TemplateError` when it does not
    parse. The result keeps undefined values strict."""
    try:
        return ENV.compile_expression(expression, undefined_to_none=False)
    except jinja2.TemplateSyntaxError as error:
        raise TemplateError(f"expression {shown_value(expression.strip())} does not parse: {error.message}") from None


@_memory_bounded
def evaluate_when(expression: Any, context: dict) -> bool:
    """Evaluate a ``when:`` (a string expression, a bool, or a list meaning "all of")."""
    if isinstance(expression, bool):
        return expression
    if isinstance(expression, list):
        return all(evaluate_when(item, context) for item in expression)
    result = compile_expression(str(expression))(**context)
    if isinstance(result, jinja2.runtime.Undefined):
        result._fail_with_undefined_error()
    return bool(result)


def template_loader(user_dirs: Iterable[Path]) -> jinja2.Environment:
    """An environment that finds templates in ``user_dirs`` first, then provision's ``templates/``."""
    env = _environment(loader=jinja2.FileSystemLoader([str(p) for p in user_dirs] + [str(resource_dir("templates"))]))
    return env


def render_template(env: jinja2.Environment, name: str, context: dict) -> str:
    """Render template file ``name``; a failure names the template, its line and the cause."""
    try:
        return env.get_template(name).render(context)
    except jinja2.TemplateNotFound:
        raise TemplateError(f"template {shown_value(name)} not found (searched {', '.join(env.loader.searchpath)})") from None
    except jinja2.TemplateSyntaxError as error:
        raise TemplateError(f"template {error.filename or name}:{error.lineno}: {error.message}") from None
    except MemoryError:
        raise TemplateError(f"template {name}: {OUT_OF_MEMORY}") from None
    except (jinja2.UndefinedError, jinja2.TemplateError, TypeError, ValueError) as error:
        line = None
        for frame, lineno in traceback.walk_tb(error.__traceback__):
            if frame.f_code.co_filename.endswith(name):
                line = lineno
        where = f"{name}:{line}" if line else name
        raise TemplateError(f"template {where}: {error}") from None
