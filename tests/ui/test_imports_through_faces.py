"""Callers reach a package through its face (its ``__init__``'s ``__all__``), never a module
inside it, so that a package's modules can be split or renamed without touching its callers:
the dashboard and the CLI through every face below them, the tuner through the collector's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _faces(layer: str) -> tuple[str, ...]:
    # a face is a package whose __init__ states its public names
    return tuple(
        "slotune." + ".".join(init.parent.relative_to(ROOT).parts)
        for init in sorted((ROOT / layer).rglob("__init__.py"))
        if "__all__" in init.read_text()
    )


COLLECTOR_FACES = _faces("collector")
# the tuner's face fronts its tuning wing (tuner/tune/), which has no face of its own
TUNER_FACES = (*(face for face in _faces("tuner") if face != "slotune.tuner"), "slotune.tuner.tune")
# modules that hold what no face lists yet
KNOWN_DEEP = {
    # the dashboard's tuning page helpers, not on the tuner's face
    "slotune.tuner.tune.dashboard",
    "slotune.tuner.tune.worker",
    "slotune.collector.workload.synthetic",
    "slotune.collector.workload.tokens",
}


def _imported(folder: str) -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.append((str(path.relative_to(ROOT)), node.module))
            elif isinstance(node, ast.Import):
                found.extend((str(path.relative_to(ROOT)), alias.name) for alias in node.names)
    return found


def _deep(module: str, faces: tuple[str, ...]) -> bool:
    inside = [face for face in faces if module.startswith(face + ".")]
    # a sub-package with a face of its own is reached through that face
    return bool(inside) and module not in faces and module not in KNOWN_DEEP


@pytest.mark.parametrize(
    ("folder", "faces"),
    [("ui", COLLECTOR_FACES + TUNER_FACES), ("tuner", COLLECTOR_FACES)],
)
def test_callers_import_through_the_faces(folder: str, faces: tuple[str, ...]) -> None:
    deep = [f"{path}: {module}" for path, module in _imported(folder) if _deep(module, faces)]
    assert deep == []


def _package_folder(private_module: str) -> str:
    # slotune.tuner.diagnose._split -> tuner/diagnose/
    return private_module.split("._")[0].removeprefix("slotune.").replace(".", "/") + "/"


def test_no_private_module_is_imported_from_another_package() -> None:
    private = [
        f"{path}: {module}"
        for folder in ("ui", "tuner", "collector")
        for path, module in _imported(folder)
        if module.startswith("slotune.")
        and "._" in module
        and not path.startswith(_package_folder(module))
    ]
    assert private == []
