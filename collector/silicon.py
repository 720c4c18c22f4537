"""Closed-loop measurements of real engines in AIConfigurator's silicon CSV format.

NVIDIA's AIConfigurator publishes end-to-end runs of vLLM, SGLang and TensorRT-LLM
(``silicon_sample.csv``, Apache-2.0): each row is one engine configuration measured at a fixed
number of requests in flight (``batch_size``) with fixed input and output lengths, and gives
the mean TTFT and TPOT. slotune reads them to check and calibrate its simulator; see
docs/simulator-calibration.md. Only the columns read here are required.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from slotune.collector.errors import ConfigError
from slotune.collector.textfile import read_text

REQUIRED_COLUMNS = (
    "backend",
    "model_path",
    "system",
    "mode",
    "isl",
    "osl",
    "batch_size",
    "tp_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)
# Lengths and counts no real run reaches: a larger value is a broken row, not a measurement.
_MAX_TOKENS = 1 << 21
_MAX_COUNT = 1 << 16


@dataclass(frozen=True, slots=True)
class SiliconRow:
    """One measured closed-loop run.

    Attributes:
        row_id: the row's ``id`` (or ``line N`` where the file has none).
        engine: ``vllm``, ``sglang`` or ``trtllm`` (the ``backend`` column).
        engine_version: the engine's version, "" where not given.
        model_path: the Hugging Face model the engine served.
        system: AIConfigurator's GPU system name (``h100_sxm`` …).
        precision: the weights' precision, ``bf16`` where the column is empty.
        mode: ``agg`` (one engine serves prefill and decode) or ``disagg``.
        input_tokens / output_tokens: every request's lengths.
        concurrency: requests kept in flight per engine.
        tensor_parallel_size / pipeline_parallel_size / attention_dp_size: the layout
            (pipeline and attention data parallelism 1 where not given).
        ttft_ms / tpot_ms: measured means.
    """

    row_id: str
    engine: str
    engine_version: str
    model_path: str
    system: str
    precision: str
    mode: str
    input_tokens: int
    output_tokens: int
    concurrency: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    attention_dp_size: int
    ttft_ms: float
    tpot_ms: float


def read_silicon(path: str | Path) -> list[SiliconRow]:
    """Every row of a silicon CSV file.

    Rows of disaggregated runs (no ``batch_size`` / ``tp_size``) are kept with those
    counts 0, so a caller can list them as rows it does not model.

    Raises:
        ConfigError: unreadable file, a missing column, or a bad value, naming the line and
            the column.
    """
    text = read_text(path, "silicon measurements CSV")
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise ConfigError(
            f"{path}: not a silicon measurements CSV: missing column(s) {', '.join(missing)}"
        )
    rows = []
    for line, raw in enumerate(reader, start=2):
        try:
            rows.append(_row(raw, line))
        except ValueError as e:
            raise ConfigError(f"{path}: line {line}: {e}") from None
    if not rows:
        raise ConfigError(f"{path}: no measurement rows")
    return rows


def _row(raw: Mapping[str, str | None], line: int) -> SiliconRow:
    def text(column: str) -> str:
        return (raw.get(column) or "").strip()

    def count(column: str, default: str = "", *, high: int = _MAX_COUNT) -> int:
        value = text(column) or default
        if not value:
            return 0
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{column}: expected a whole number, got {value[:40]!r}") from None
        if not (1 <= number < high) or number != int(number):
            raise ValueError(
                f"{column}: expected a whole number from 1 to {high - 1}, got {value[:40]!r}"
            )
        return int(number)

    def millis(column: str) -> float:
        value = text(column)
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{column}: expected milliseconds, got {value[:40]!r}") from None
        if not (math.isfinite(number) and number > 0):
            raise ValueError(f"{column}: expected a positive, finite time, got {value[:40]!r}")
        return number

    agg = text("mode") != "disagg"
    row = SiliconRow(
        row_id=text("id") or f"line {line}",
        engine=text("backend"),
        engine_version=text("backend_version"),
        model_path=text("model_path"),
        system=text("system"),
        precision=text("precision") or "bf16",
        mode=text("mode") or "agg",
        input_tokens=count("isl", high=_MAX_TOKENS),
        output_tokens=count("osl", high=_MAX_TOKENS),
        concurrency=count("batch_size"),
        tensor_parallel_size=count("tp_size"),
        pipeline_parallel_size=count("pp_size", "1"),
        attention_dp_size=count("attention_dp_size", "1"),
        ttft_ms=millis("silicon_ttft_ms"),
        tpot_ms=millis("silicon_tpot_ms"),
    )
    for column, value in (
        ("isl", row.input_tokens),
        ("osl", row.output_tokens),
        *((("batch_size", row.concurrency), ("tp_size", row.tensor_parallel_size)) if agg else ()),
    ):
        if value == 0:
            raise ValueError(f"{column}: missing")
    return row
