"""Save an analysis result (a diagnosis, a fleet plan) in the store's ``diagnosis`` table.

The one writer of these rows for the CLI and the dashboard, so both store the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SUBJECT_MAX_CHARS = 200  # the diagnosis table's subject column


def store_result(
    db_url: str | None,
    kind: str,
    inputs: Mapping[str, Any],
    result: Mapping[str, Any],
    *,
    subject: str,
) -> int:
    """Save one result; returns its id.

    Args:
        db_url: the store (None: the default SQLite file).
        kind: what produced it (``trace``, ``live``, ``fleet-plan`` …).
        inputs: what it was asked, as JSON.
        result: the result's JSON (its ``to_dict()``).
        subject: what it is about; only its last characters are kept when it is longer than
            the column.

    Raises:
        StoreError: the store cannot be opened or written.
    """
    from slotune.collector.store import open_store, save_diagnosis

    with open_store(db_url) as store:
        return save_diagnosis(store, kind, inputs, result, subject=subject[-SUBJECT_MAX_CHARS:])
