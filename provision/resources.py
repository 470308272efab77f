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
    import jinja2

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


@lru_cache(maxsize=1)
def template_environment() -> jinja2.Environment:
    """The Jinja2 environment for ``templates/`` (strict: an undefined variable is an error).
    Jinja2 is imported here, on first use: a command that renders nothing never loads it."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(template: str, **values) -> str:
    """Render ``templates/<template>`` with ``values``."""
    return template_environment().get_template(template).render(**values)
