"""The vocabulary: dependency-free, and every kind complete."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from slotune.collector.vocabulary import Engine, SourceKind, choices, engine_kinds

_PROBE = """
import sys
import slotune.collector.vocabulary
print(" ".join(sorted(m for m in sys.modules if m.startswith("slotune.") or m in sys.argv[1:])))
"""
_HEAVY = ("optuna", "sqlalchemy", "numpy", "httpx", "aiohttp", "typer", "yaml")


def test_importing_the_vocabulary_loads_nothing_else_of_slotune_or_a_library() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *_HEAVY], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["slotune.collector", "slotune.collector.vocabulary"]


@pytest.mark.parametrize("kind", list(SourceKind), ids=str)
def test_every_source_kind_has_its_traits(kind: SourceKind) -> None:
    assert isinstance(kind.is_engine, bool)
    assert all(p.startswith("/") for p in kind.default_paths)
    assert kind.needs_url == bool(kind.default_paths)
    # a prefix goes into a PromQL regex unescaped: it must be a metric name's start
    assert kind.federate_prefix == "" or re.fullmatch(
        r"[a-zA-Z_:][a-zA-Z0-9_:]*", kind.federate_prefix
    )
    assert not (kind.is_engine and kind.is_gpu)


def test_every_tunable_engine_is_a_scrapeable_engine() -> None:
    # a trial scrapes the engine it tunes, so each engine needs an engine source kind
    assert {e.value for e in Engine} <= {k.value for k in engine_kinds()}


def test_choices_lists_the_values_in_order() -> None:
    assert choices(SourceKind).split(" | ") == [k.value for k in SourceKind]
