"""Durations as users write them (collector/durations.py)."""

from __future__ import annotations

import pytest

from slotune.collector.durations import parse_duration_s
from slotune.collector.errors import SLOSpecError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("30d", 2592000.0), ("1w", 604800.0), (15, 15.0), ("2.5h", 9000.0)],
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


def test_bad_duration_names_the_field() -> None:
    with pytest.raises(SLOSpecError, match="--older-than: 'soon' is not a duration"):
        parse_duration_s("soon", field_name="--older-than")
    with pytest.raises(SLOSpecError, match="with a unit"):  # text needs a unit: 90s or 90m?
        parse_duration_s("90")
