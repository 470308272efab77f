"""Locate the project's templates, playbooks and example inventory, in a source checkout or a
pip-installed wheel.

The wheel carries them inside the package (``provision/templates``, ``provision/playbooks``,
``provision/inventory/hosts.example.yml``);
a checkout has them at the top level beside ``provision/``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jinja2.sandbox import SandboxedEnvironment

_PACKAGE_DIR = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """The folder ``templates`` or ``playbooks``, wherever this install keeps it."""
    for candidate in (_PACKAGE_DIR / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"provision's {name}/ folder is missing from this install ({_PACKAGE_DIR})")


def resource_file(relative: str) -> Path:
    """A file shipped with provision (``inventory/hosts.example.yml``), in a wheel or a checkout."""
    for candidate in (_PACKAGE_DIR / relative, _PACKAGE_DIR.parent / relative):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"provision's {relative} is missing from this install ({_PACKAGE_DIR})")


MAX_BUILT = 1 << 24  # characters or items one ``*`` of a template may build (16 Mi); the bits of a ``**``: 1 Mi


def _bounded(left: object, right: object, operator: str) -> None:
    """Refuse (jinja2's ``SecurityError``, as the sandbox refuses a ``range`` too big) a ``*`` that
    repeats a text or list past :data:`MAX_BUILT`, and an integer ``**`` whose result would need
    more than 1 Mi bits: ``{{ 'x' * 4000000000 }}`` took gigabytes and minutes, then failed with
    an empty MemoryError."""
    from jinja2.exceptions import SecurityError

    if operator == "*":
        for sequence, times in ((left, right), (right, left)):
            if isinstance(sequence, (str, bytes, list, tuple)) and isinstance(times, int) and len(sequence) * times > MAX_BUILT:
                raise SecurityError(
                    f"'*' would build {len(sequence) * times} {'characters' if isinstance(sequence, str) else 'items'}: "
                    f"templates build at most {MAX_BUILT}"
                )
    elif isinstance(left, int) and isinstance(right, int) and right > 0 and right * abs(left).bit_length() > 1 << 20:
        bits = right * abs(left).bit_length()
        raise SecurityError(f"'**' would build a number of about {bits} bits: templates build at most {1 << 20}")


@lru_cache(maxsize=1)
def _sandbox_class() -> type:
    from jinja2.sandbox import SandboxedEnvironment

    class BoundedSandbox(SandboxedEnvironment):
        """jinja2's sandbox, with ``*`` and ``**`` bounded (:func:`_bounded`)."""

        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context, operator, left, right):
            _bounded(left, right, operator)
            return super().call_binop(context, operator, left, right)

    return BoundedSandbox


def jinja_environment(*, autoescape: bool = False, **extra) -> SandboxedEnvironment:
    """provision's one kind of Jinja2 environment: sandboxed (``*`` and ``**`` bounded too), strict
    (an undefined variable is an error), trailing newlines kept, nothing HTML-escaped (``autoescape``:
    everything, for a web page). ``extra`` adds a loader or a finalizer; the templating layer adds its
    filters on top. Jinja2 is imported here, on first use: a command that renders nothing never loads it.

    >>> jinja_environment().from_string("{{ n }} GPUs").render(n=4)
    '4 GPUs'
    """
    import jinja2

    return _sandbox_class()(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=autoescape, **extra)


@lru_cache(maxsize=1)
def template_environment() -> SandboxedEnvironment:
    """The environment for provision's own ``templates/`` (the capture script, the batch script)."""
    import jinja2

    return jinja_environment(loader=jinja2.FileSystemLoader(str(resource_dir("templates"))))


def render(template: str, **values) -> str:
    """Render ``templates/<template>`` with ``values``."""
    return template_environment().get_template(template).render(**values)


def _visible(value: object) -> object:
    """A page's finalizer: every string's control characters made visible before it is escaped
    (markup built and escaped by provision itself, such as an SVG, passes as it is)."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        from provision.text import shown

        return shown(value, newlines=False)
    return value


@lru_cache(maxsize=1)
def page_environment() -> SandboxedEnvironment:
    """The environment for provision's HTML pages (``templates/*.html.j2``): every value
    HTML-escaped, its control characters made visible first. Node text lands in these pages."""
    import jinja2

    return jinja_environment(autoescape=True, finalize=_visible, loader=jinja2.FileSystemLoader(str(resource_dir("templates"))))


def render_page(template: str, **values) -> str:
    """Render the HTML page ``templates/<template>`` with ``values`` (:func:`page_environment`)."""
    return page_environment().get_template(template).render(**values)
