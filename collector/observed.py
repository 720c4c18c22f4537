"""Measured requests, one JSON object a line: what ``slotune sim calibrate`` fits on.

Format (JSONL)::

    {"timestamp": 0.0, "input_tokens": 812, "output_tokens": 190, "ttft_ms": 41.2,
     "e2e_ms": 2210.5}

``timestamp`` is the arrival in seconds (any origin, non-decreasing), the token counts are
the server's, ``ttft_ms`` and ``e2e_ms`` are client-side as in ``slotune bench``. Optional:
``hash_ids`` and ``block_size`` (prefix blocks, as in the canonical trace format),
``tpot_ms`` / ``itl_ms``, ``request_id`` and ``model``. ``slotune sim --requests-out`` and
:func:`write_observed` write the same format (plus ``request_id``), so simulated and real
runs compare request by request.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotune.collector.errors import ConfigError
from slotune.collector.jsonfile import read_json
from slotune.collector.records import RequestRecord
from slotune.collector.textfile import read_text, write_text
from slotune.collector.workload.traces import TraceRequest

REQUIRED_FIELDS = ("timestamp", "input_tokens", "output_tokens", "ttft_ms", "e2e_ms")


@dataclass(frozen=True, slots=True)
class ObservedRequest:
    """One measured request (times in the file's clock, seconds and milliseconds).

    Attributes:
        timestamp_s: arrival.
        input_tokens: prompt tokens.
        output_tokens: generated tokens.
        ttft_ms: arrival -> first token.
        e2e_ms: arrival -> last token.
        tpot_ms: (e2e - ttft) / (output_tokens - 1) when given or derivable, else None.
        hash_ids: prefix-block ids of the prompt.
        block_size: tokens per ``hash_ids`` block.
        request_id: the file's id, else the line number.
        line: line of the file it came from (for messages).
    """

    timestamp_s: float
    input_tokens: int
    output_tokens: int
    ttft_ms: float
    e2e_ms: float
    tpot_ms: float | None
    hash_ids: tuple[int, ...] = ()
    block_size: int | None = None
    request_id: str = ""
    line: int = 0


def read_observed(path: str | Path, *, model_names: Collection[str] = ()) -> list[ObservedRequest]:
    """Read and check a measured-requests file.

    Args:
        path: the JSONL file.
        model_names: when given, the names of the model calibrated (lowercase); a line
            whose ``model`` is none of them is refused.

    Raises:
        ConfigError: unreadable file, or a line with a missing or bad field, a negative or
            out-of-order timestamp, TTFT greater than E2E, or another model; the message
            names the file, the line and the field.
    """
    path = Path(path)
    text = read_text(path, "observed requests", ConfigError)
    out: list[ObservedRequest] = []
    previous = -math.inf
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{path}:{number}"
        entry = read_json(raw, source=where)
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}: not a JSON object; write one per line")
        request = _parse(entry, where, number, model_names)
        if request.timestamp_s < previous:
            raise ConfigError(
                f"{where}: timestamp {request.timestamp_s:g} is before the previous line's "
                f"{previous:g}; sort the file by timestamp"
            )
        previous = request.timestamp_s
        out.append(request)
    return out


def _parse(
    entry: Mapping[str, Any], where: str, number: int, model_names: Collection[str]
) -> ObservedRequest:
    missing = [k for k in REQUIRED_FIELDS if k not in entry]
    if missing:
        raise ConfigError(
            f"{where}: field {missing[0]!r} is missing; every line needs "
            f"{', '.join(REQUIRED_FIELDS)}"
        )
    name = entry.get("model")
    if model_names and name is not None and str(name).lower() not in model_names:
        raise ConfigError(
            f"{where}: field 'model' is {name!r}, not the model calibrated "
            f"({' / '.join(sorted(model_names))}); calibrate on measurements of that model"
        )
    timestamp = _finite(entry, "timestamp", where)
    if timestamp < 0:
        raise ConfigError(f"{where}: field 'timestamp' is negative ({timestamp:g}); use >= 0")
    ttft, e2e = _finite(entry, "ttft_ms", where), _finite(entry, "e2e_ms", where)
    if ttft < 0:
        raise ConfigError(f"{where}: field 'ttft_ms' is negative ({ttft:g})")
    if ttft > e2e:
        raise ConfigError(
            f"{where}: field 'ttft_ms' ({ttft:g}) is greater than 'e2e_ms' ({e2e:g}); "
            "both count from the request's arrival"
        )
    output_tokens = _count(entry, "output_tokens", where)
    tpot: float | None = None
    for key in ("tpot_ms", "itl_ms"):
        if entry.get(key) is not None:
            tpot = _finite(entry, key, where)
            break
    if tpot is None and output_tokens > 1:
        tpot = (e2e - ttft) / (output_tokens - 1)
    hash_ids = entry.get("hash_ids") or ()
    if not isinstance(hash_ids, list | tuple) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in hash_ids
    ):
        raise ConfigError(f"{where}: field 'hash_ids' must be a list of integers")
    block_size = entry.get("block_size")
    if hash_ids and block_size is None:
        block_size = 512  # the Mooncake traces' block size, as the trace readers assume
    return ObservedRequest(
        timestamp_s=timestamp,
        input_tokens=_count(entry, "input_tokens", where),
        output_tokens=output_tokens,
        ttft_ms=ttft,
        e2e_ms=e2e,
        tpot_ms=tpot,
        hash_ids=tuple(hash_ids),
        block_size=None if block_size is None else _count(entry, "block_size", where),
        request_id=str(entry.get("request_id", number)),
        line=number,
    )


def _finite(entry: Mapping[str, Any], key: str, where: str) -> float:
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: field {key!r} must be a finite number, got {value!r}")
    return float(value)


def _count(entry: Mapping[str, Any], key: str, where: str) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: field {key!r} must be a whole number >= 1, got {value!r}")
    return value


def observed_lines(
    records: Sequence[RequestRecord], trace: Sequence[TraceRequest] | None = None
) -> Iterable[dict[str, Any]]:
    """The measured-requests lines of finished records, in their order, plus ``request_id``.

    Failed requests have no TTFT or E2E and are left out. ``timestamp`` counts from the
    first record's send time.
    """
    start = min((r.send_s for r in records), default=0.0)
    for i, r in enumerate(records):
        ttft, e2e = r.ttft_s, r.e2e_s
        if not r.is_ok or ttft is None or e2e is None:
            continue
        line: dict[str, Any] = {
            "request_id": r.request_id,
            "timestamp": r.send_s - start,
            "input_tokens": r.input_tokens,
            "output_tokens": r.num_output_tokens,
            "ttft_ms": ttft * 1000.0,
            "e2e_ms": e2e * 1000.0,
        }
        tpot = r.tpot_s
        if tpot is not None:
            line["tpot_ms"] = tpot * 1000.0
        if trace is not None and trace[i].hash_ids:
            line["hash_ids"] = list(trace[i].hash_ids)
            line["block_size"] = trace[i].block_size
        yield line


def write_observed(
    records: Sequence[RequestRecord],
    path: str | Path,
    *,
    trace: Sequence[TraceRequest] | None = None,
) -> int:
    """Write finished records in the measured-requests format (``slotune bench`` and
    ``slotune sim`` ``--requests-out``).

    Args:
        records: request records in trace order.
        path: the JSONL file to write (replaced).
        trace: the trace the records replayed, to carry each prompt's ``hash_ids`` along.

    Returns:
        The number of lines written.

    Raises:
        ConfigError: the file cannot be written.
    """
    lines = [json.dumps(line) for line in observed_lines(records, trace)]
    write_text(path, "".join(f"{x}\n" for x in lines), "measured requests")
    return len(lines)
