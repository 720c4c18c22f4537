"""Each collector package's public surface is exactly its ``__all__`` (httpx's
``test_exported_members.py``): every public name is listed, every listed name exists, and the
list has no duplicates, so adding or removing a public name is a deliberate change of this file's
expectations, not an accident of an import."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

PACKAGES = [
    "slotune.collector.agent",
    "slotune.collector.alerts",
    "slotune.collector.bench",
    "slotune.collector.metrics",
    "slotune.collector.slo",
    "slotune.collector.store",
    "slotune.collector.views",
    "slotune.collector.workload",
]


def _public(package: ModuleType) -> list[str]:
    # Submodules become attributes of their package once imported: they are not exports.
    return sorted(
        name
        for name, member in vars(package).items()
        if not name.startswith("_") and not isinstance(member, ModuleType) and name != "annotations"
    )


@pytest.mark.parametrize("name", PACKAGES)
def test_all_public_members_are_exported(name: str) -> None:
    package = importlib.import_module(name)
    assert len(set(package.__all__)) == len(package.__all__)
    assert _public(package) == sorted(package.__all__)


def test_one_metric_type_for_the_agent_and_the_store() -> None:
    from slotune.collector.agent import MetricType as AgentMetricType
    from slotune.collector.store import MetricType as StoreMetricType

    assert AgentMetricType is StoreMetricType


def test_the_bench_command_uses_only_the_package_surface() -> None:
    import ast
    from pathlib import Path

    import slotune.ui.cli.bench as cli

    tree = ast.parse(Path(cli.__file__).read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("slotune.collector.bench")
    }
    assert imported == {"slotune.collector.bench"}
