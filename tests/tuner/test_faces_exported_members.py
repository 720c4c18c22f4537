"""Each tuner package's public surface is exactly its ``__all__`` (httpx's
``test_exported_members.py``): every public name is listed, every listed name exists and is
not a module, and the list has no duplicates. A face that loads its names on first use
(PEP 562) states each name in three places that static tools and the runtime read (the
``TYPE_CHECKING`` imports, the ``_LAZY`` table, ``__all__``): they must name the same set."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest

PACKAGES = [
    "slotune.tuner",
    "slotune.tuner.diagnose",
    "slotune.tuner.fleet",
    "slotune.tuner.sim",
    "slotune.tuner.sim.calibration",
    "slotune.tuner.sim.catalog",
    "slotune.tuner.emulate",
]
# packages whose own code lives in ``__init__`` (its imports are attributes too): only their
# listed names are checked
CODE_PACKAGES = ["slotune.tuner.tiny_model", "slotune.tuner.tune.backends"]

# what a lazy face imports to build itself, not what it exports
_MACHINERY = {"TYPE_CHECKING", "Any", "annotations"}


def _public(package: ModuleType) -> list[str]:
    # Submodules become attributes of their package once imported: they are not exports.
    return sorted(
        name
        for name, member in vars(package).items()
        if not name.startswith("_")
        and not isinstance(member, ModuleType)
        and name not in _MACHINERY
    )


def _type_checking_names(package: ModuleType) -> set[str]:
    tree = ast.parse(Path(str(package.__file__)).read_text())
    return {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for imported in node.body
        if isinstance(imported, ast.ImportFrom)
        for alias in imported.names
    }


@pytest.mark.parametrize("name", PACKAGES + CODE_PACKAGES)
def test_all_public_members_are_exported(name: str) -> None:
    package = importlib.import_module(name)
    assert len(set(package.__all__)) == len(package.__all__)
    for member in package.__all__:
        assert not isinstance(getattr(package, member), ModuleType), member
    if name not in CODE_PACKAGES:
        assert _public(package) == sorted(package.__all__)


@pytest.mark.parametrize(
    "name", [n for n in PACKAGES if hasattr(importlib.import_module(n), "_LAZY")]
)
def test_a_lazy_face_names_each_export_alike_for_tools_and_runtime(name: str) -> None:
    package = importlib.import_module(name)
    lazy = {member for members in package._LAZY.values() for member in members}
    assert len(lazy) == sum(len(members) for members in package._LAZY.values())
    assert _type_checking_names(package) == lazy
    assert lazy <= set(package.__all__)
