"""Fixtures of the load generator's tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from bench_fakes import FakeEngine


@pytest.fixture
def fake_engine() -> Iterator[Callable[..., FakeEngine]]:
    """Factory: ``fake_engine(flavour=..., mode_of=...)`` starts a fake server."""
    started: list[FakeEngine] = []

    def make(**kwargs: Any) -> FakeEngine:
        engine = FakeEngine(**kwargs)
        engine.start()
        started.append(engine)
        return engine

    yield make
    for engine in started:
        engine.stop()
