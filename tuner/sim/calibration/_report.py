"""The fit report: MAPE tables in Markdown, spliced into the calibration doc."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.tuner.sim.calibration._data import OpSamples
from slotune.tuner.sim.calibration._model import mape

BEGIN = "<!-- fit-report:begin -->"
END = "<!-- fit-report:end -->"
TP_SIZES = (1, 2, 4, 8)
TOKEN_BUCKETS = ((1, 64), (65, 512), (513, 4096), (4097, 32768))

Predict = Callable[[OpSamples], np.ndarray]


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _table(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def op_table(samples: list[OpSamples], predict: Predict) -> list[str]:
    """MAPE (%) per GPU family, model and operator, by tensor-parallel size and overall."""
    rows = []
    for s in samples:
        pred = predict(s)
        cells = []
        for tp in TP_SIZES:
            sel = s.tensor_parallel_size == tp
            cells.append(_cell(mape(pred[sel], s.measured_s[sel]) if sel.any() else None))
        rows.append(
            [
                s.family,
                s.model,
                s.op,
                *cells,
                _cell(mape(pred, s.measured_s)),
                str(len(s.measured_s)),
            ]
        )
    return _table(
        ["GPU", "model", "operator", *(f"TP{t}" for t in TP_SIZES), "all", "points"], rows
    )


def group_table(groups: dict[tuple[str, str, str], list[OpSamples]], predict: Predict) -> list[str]:
    """MAPE (%) per GPU, model and operator group, by token-count range.

    A group's time at one (tokens, TP) point is the sum of its operators, so the error is the
    one the simulator makes on the group as a whole.
    """
    rows = []
    for (family, model, group), members in groups.items():
        tokens = members[0].num_tokens
        measured = np.sum([m.measured_s for m in members], axis=0)
        pred = np.sum([predict(m) for m in members], axis=0)
        cells = []
        for lo, hi in TOKEN_BUCKETS:
            sel = (tokens >= lo) & (tokens <= hi)
            cells.append(_cell(mape(pred[sel], measured[sel]) if sel.any() else None))
        rows.append([family, model, group, *cells, _cell(mape(pred, measured))])
    return _table(
        ["GPU", "model", "group", *(f"{lo}–{hi} tok" for lo, hi in TOKEN_BUCKETS), "all"], rows
    )


def write_report(doc_path: Path, body: list[str]) -> None:
    """Replaces the text between the report markers of ``doc_path`` with ``body``.

    Raises:
        ConfigError: the document lacks the markers.
    """
    try:
        text = doc_path.read_text("utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {doc_path}: {e.strerror}; pass --report PATH") from e
    if BEGIN not in text or END not in text:
        raise ConfigError(f"{doc_path} has no {BEGIN} ... {END} section to fill")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc_path.write_text(head + BEGIN + "\n" + "\n".join(body) + "\n" + END + tail, "utf-8")
