"""Idempotent operations (pyinfra's contract): pure functions from arguments and host facts to
changes. Every module of this package that defines ``OPERATIONS`` (name -> :class:`Operation`)
adds its operations to the registry :data:`OPERATIONS`, the names a playbook may use: adding an
operation is adding a module (importing it also declares the state kinds it reads)."""

from __future__ import annotations

import importlib
import pkgutil

from provision.operations.base import Operation

OPERATIONS: dict[str, Operation] = {}
for _module in pkgutil.iter_modules(__path__):
    for _name, _operation in getattr(importlib.import_module(f"{__name__}.{_module.name}"), "OPERATIONS", {}).items():
        if _name in OPERATIONS:
            raise RuntimeError(f"operation {_name!r} is defined twice")
        OPERATIONS[_name] = _operation
