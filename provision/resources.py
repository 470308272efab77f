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


def jinja_environment(*, autoescape: bool = False, **extra) -> SandboxedEnvironment:
    """provision's one kind of Jinja2 environment: sandboxed, what it builds bounded
    (:mod:`provision.sandbox`), strict
    (an undefined variable is an error), trailing newlines kept, nothing HTML-escaped (``autoescape``:
    everything, for a web page). ``extra`` adds a loader or a finalizer; the templating layer adds its
    filters on top. Jinja2 is imported here, on first use: a command that renders nothing never loads it.

    >>> jinja_environment().from_string("{{ n }} GPUs").render(n=4)
    '4 GPUs'
    """
    import jinja2

    from provision.sandbox import bounded_sandbox

    return bounded_sandbox()(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=autoescape, **extra)


@lru_cache(maxsize=1)
def template_environment() -> SandboxedEnvironment:
    """The environment for the commands' own templates, ``templates/commands/`` (the capture
    script, the batch script, the rank file). They are kept apart from the roles' templates in
    ``templates/``: those are what a playbook renders, and what setup-cluster reads each run for
    the variables a playbook reads (:func:`provision.engine.names.read_names`)."""
    import jinja2

    return jinja_environment(loader=jinja2.FileSystemLoader(str(resource_dir("templates") / "commands")))


def render(template: str, **values) -> str:
    """Render ``templates/commands/<template>`` with ``values``."""
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
    """The environment for provision's HTML pages (``templates/commands/*.html.j2``): every value
    HTML-escaped, its control characters made visible first. Node text lands in these pages."""
    import jinja2

    folder = str(resource_dir("templates") / "commands")
    return jinja_environment(autoescape=True, finalize=_visible, loader=jinja2.FileSystemLoader(folder))


def render_page(template: str, **values) -> str:
    """Render the HTML page ``templates/commands/<template>`` with ``values`` (:func:`page_environment`)."""
    return page_environment().get_template(template).render(**values)
