"""A package face whose names load on first use (PEP 562).

A face lists its names three ways, each for a reader that needs it: ``TYPE_CHECKING``
imports for the type checkers, a table of module -> names for the runtime (built here into
the module's ``__getattr__``), and a literal ``__all__`` for both.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str,
    table: Mapping[str, tuple[str, ...]],
    renamed: Mapping[str, str] | None = None,
) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a listed name imports its module once and
    stays in the package's namespace; ``renamed`` maps a public name to its module's own."""
    home = {name: module for module, names in table.items() for name in names}
    own = dict(renamed or {})
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), own.get(name, name))
        namespace[name] = value
        return value

    return __getattr__
