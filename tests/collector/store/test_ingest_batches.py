"""Batches in any order, replayed or repeated, leave the same samples and counter resets."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from slotune.collector.errors import StoreUnavailable
from slotune.collector.store import (
    SampleIn,
    Store,
    counter_increase,
    latest_value,
    open_store,
    upgrade,
    write_samples,
)

T0 = 1_700_000_000.0
_targets = itertools.count()


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Store]:
    """One store for every generated example; each example writes its own target."""
    upgrade(sqlite_url)
    with open_store(sqlite_url) as s:
        yield s


def stored(store: Store, target: str, table: str, column: str) -> list[tuple[float, float]]:
    with store.connection() as conn:
        return [
            (float(ts), float(v))
            for ts, v in conn.execute(
                text(
                    f"SELECT r.ts, r.{column} FROM {table} r JOIN metric_series s ON s.id = r.series_id "
                    "JOIN target t ON t.id = s.target_id WHERE t.name = :t AND s.name = 'reqs_total' "
                    "ORDER BY r.ts"
                ),
                {"t": target},
            )
        ]


def expected_resets(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(ts, prev) for (_, prev), (ts, value) in itertools.pairwise(points) if value < prev]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(st.integers(0, 9), min_size=1, max_size=30), data=st.data())
def test_any_batching_finds_every_reset(
    sqlite_store: Store, values: list[int], data: st.DataObject
) -> None:
    target = f"e{next(_targets)}"
    labels = {"model": "m"}
    samples = [
        SampleIn(target, "reqs_total", "counter", labels, T0 + 5 * i, float(v))
        for i, v in enumerate(values)
    ]
    # Shuffled, cut into batches, some batches sent twice and some samples twice in a batch.
    order = data.draw(st.permutations(samples))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(order)), max_size=4)))
    batches = [list(order[a:b]) for a, b in itertools.pairwise([0, *cuts, len(order)])]
    for batch in batches:
        doubled = data.draw(st.lists(st.sampled_from(batch), max_size=2)) if batch else []
        gauge = SampleIn(target, "queue", "gauge", {}, T0, 1.0)
        write_samples(sqlite_store, [*batch, *doubled, gauge])
        if data.draw(st.booleans()):
            write_samples(sqlite_store, batch)

    points = [(T0 + 5 * i, float(v)) for i, v in enumerate(values)]
    assert stored(sqlite_store, target, "sample", "value") == points
    assert stored(sqlite_store, target, "counter_reset", "prev_value") == expected_resets(points)
    increase = sum(b - a if b >= a else b for a, b in itertools.pairwise(values))
    assert (
        counter_increase(sqlite_store, target, "reqs_total", T0, T0 + 5 * len(values)) == increase
    )


def test_labels_changed_in_place_name_another_series(store: Store) -> None:
    labels = {"model": "a"}
    write_samples(store, [SampleIn("e1", "reqs_total", "counter", labels, T0, 1.0)])
    labels["model"] = "b"
    write_samples(store, [SampleIn("e1", "reqs_total", "counter", labels, T0, 7.0)])
    assert latest_value(store, "e1", "reqs_total", {"model": "a"}) == 1.0
    assert latest_value(store, "e1", "reqs_total", {"model": "b"}) == 7.0


def test_conflicting_repeat_in_a_batch_keeps_the_first_value(store: Store) -> None:
    labels = {"model": "m"}
    batch = [
        SampleIn("e1", "reqs_total", "counter", labels, T0 + ts, v)
        for ts, v in [(0, 5.0), (0, 3.0), (5, 4.0)]
    ]
    assert write_samples(store, batch) == 2
    assert stored(store, "e1", "sample", "value") == [(T0, 5.0), (T0 + 5, 4.0)]
    assert stored(store, "e1", "counter_reset", "prev_value") == [(T0 + 5, 5.0)]


def test_locked_file_on_a_known_series_is_store_unavailable(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    labels = {"model": "m"}
    with open_store(sqlite_url + "?timeout=0.2") as store:
        write_samples(store, [SampleIn("e1", "reqs_total", "counter", labels, T0, 1.0)])
        holder = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(StoreUnavailable, match="locked by another process"):
                write_samples(store, [SampleIn("e1", "reqs_total", "counter", labels, T0 + 5, 2.0)])
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert (
            write_samples(store, [SampleIn("e1", "reqs_total", "counter", labels, T0 + 5, 2.0)])
            == 1
        )
