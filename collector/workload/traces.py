"""Trace readers: the canonical JSONL, the Azure LLM CSV and the Mooncake JSONL formats.

Canonical JSONL, one request a line::

    {"timestamp": 0.0, "input_tokens": 812, "output_tokens": 120,
     "hash_ids": [0, 1], "block_size": 512, "session_id": "s1", "model": "llama-3.1-8b"}

``timestamp`` is seconds, either relative to the first request or absolute (epoch); readers
always return times relative to the first request.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.collector.jsonfile import read_json
from slotune.collector.textfile import open_regular

MOONCAKE_BLOCK_SIZE = 512
# Most tokens one request may ask for (prompt or output): more than any served model's context,
# far less than what would exhaust a client building the prompt.
MAX_REQUEST_TOKENS = 1 << 20
# Latest timestamp a trace may carry: absolute epoch seconds well past this century's; a
# larger one (1e308) would make the arrival schedule wait forever.
MAX_TIMESTAMP_S = 1e11
# One request a line: a line longer than this is not a trace line (a binary file, a file
# without newlines), and is refused before it fills memory.
MAX_LINE_CHARS = 16 << 20
_AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace.

    Attributes:
        timestamp_s: arrival, seconds from the first request.
        input_tokens: prompt length in tokens.
        output_tokens: tokens to generate.
        hash_ids: ids of the prompt's prefix blocks (equal ids = identical prompt text).
        block_size: tokens per ``hash_ids`` block.
        session_id: conversation id for multi-turn workloads.
        model: model name, when the trace carries one.
    """

    timestamp_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    block_size: int | None = None
    session_id: str | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    name: str
    requests: tuple[TraceRequest, ...]
    source: str = ""

    @property
    def duration_s(self) -> float:
        return self.requests[-1].timestamp_s if self.requests else 0.0

    @property
    def mean_rate(self) -> float:
        d = self.duration_s
        return (len(self.requests) - 1) / d if d > 0 else float("nan")

    def __len__(self) -> int:
        return len(self.requests)


NAMED_WORKLOADS: dict[str, tuple[str, str]] = {
    "azure-code": ("azure_llm_2023_code.csv", "Azure LLM inference trace 2023, code (CC-BY-4.0)"),
    "azure-conv": (
        "azure_llm_2023_conv.csv",
        "Azure LLM inference trace 2023, conversation (CC-BY-4.0)",
    ),
    "mooncake-conversation": (
        "mooncake_conversation.jsonl",
        "Mooncake FAST'25 conversation trace (Apache-2.0)",
    ),
    "mooncake-synthetic": (
        "mooncake_synthetic.jsonl",
        "Mooncake FAST'25 synthetic trace (Apache-2.0)",
    ),
}


def named_workload(name: str) -> Trace:
    """One of the bundled real traces by name (see ``NAMED_WORKLOADS``)."""
    if name not in NAMED_WORKLOADS:
        raise ConfigError(
            f"--workload {name!r} is not a bundled trace; choose one of "
            f"{', '.join(NAMED_WORKLOADS)} or pass --trace FILE"
        )
    filename, source = NAMED_WORKLOADS[name]
    ref = resources.files("slotune.collector.workload") / "data" / filename
    with resources.as_file(ref) as path:
        trace = load_trace(path)
    return replace(trace, name=name, source=source)


def resolve_workload(workload: str | None, trace_file: str | Path | None) -> Trace:
    """The trace a command asked for with ``--workload NAME`` or ``--trace FILE``."""
    if (workload is None) == (trace_file is None):
        raise ConfigError("give exactly one of --workload NAME or --trace FILE")
    if workload is not None:
        return named_workload(workload)
    assert trace_file is not None
    return load_trace(trace_file)


def load_trace(path: str | Path, fmt: str = "auto") -> Trace:
    """Read a trace file; ``fmt`` is ``auto``, ``canonical``, ``azure`` or ``mooncake``.

    Raises:
        ConfigError: unreadable file or malformed line, naming the file and line.
    """
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"--trace {p}: no such file")
    if fmt == "auto":
        fmt = _detect_format(p)
    readers = {"canonical": _read_jsonl, "mooncake": _read_jsonl, "azure": _read_azure}
    if fmt not in readers:
        raise ConfigError(f"trace format {fmt!r} is unknown; use canonical, azure or mooncake")
    try:
        requests = readers[fmt](p)
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not a UTF-8 text trace file ({e.reason} at byte {e.start})") from e
    if not requests:
        raise ConfigError(f"{p}: the trace has no requests")
    requests.sort(key=lambda r: r.timestamp_s)
    t0 = requests[0].timestamp_s
    if t0 != 0:
        requests = [replace(r, timestamp_s=r.timestamp_s - t0) for r in requests]
    return Trace(name=p.stem, requests=tuple(requests), source=str(p))


def _open(p: Path, *, errors: str = "strict", newline: str | None = None) -> TextIO:
    return io.TextIOWrapper(
        open_regular(p, "trace file"), encoding="utf-8", errors=errors, newline=newline
    )


def _lines(f: TextIO, p: Path) -> Any:
    """The file's lines, numbered from 1, each at most :data:`MAX_LINE_CHARS` long."""
    for lineno, line in enumerate(iter(lambda: f.readline(MAX_LINE_CHARS + 1), ""), 1):
        if len(line) > MAX_LINE_CHARS:
            raise ConfigError(
                f"{p}:{lineno}: a line longer than {MAX_LINE_CHARS:,} characters; a trace "
                "has one request a line"
            )
        yield lineno, line


def _detect_format(p: Path) -> str:
    with _open(p, errors="replace") as f:
        first = f.readline(4096).strip()
    if first.startswith("{"):
        return "canonical"
    if "ContextTokens" in first:
        return "azure"
    raise ConfigError(
        f"{p}: unknown trace format; expected JSONL (canonical or Mooncake) or the Azure CSV "
        "header TIMESTAMP,ContextTokens,GeneratedTokens"
    )


def _read_jsonl(p: Path) -> list[TraceRequest]:
    out: list[TraceRequest] = []
    with _open(p) as f:
        for lineno, line in _lines(f, p):
            if not line.strip():
                continue
            obj = read_json(line, source=f"{p}:{lineno}", max_chars=MAX_LINE_CHARS)
            out.append(_from_json(obj, p, lineno))
    return out


def _from_json(obj: Any, p: Path, lineno: int) -> TraceRequest:
    if not isinstance(obj, dict):
        raise ConfigError(f"{p}:{lineno}: each line must be a JSON object")
    is_mooncake = "input_length" in obj
    block: int | None
    where = f"{p}:{lineno}"
    try:
        if is_mooncake:
            ts = _timestamp(obj["timestamp"], where, scale=1e-3)
            n_in = _tokens(obj["input_length"], "input_length", where)
            n_out = _tokens(obj["output_length"], "output_length", where)
            block = _whole(obj.get("block_size", MOONCAKE_BLOCK_SIZE), "block_size", where)
        else:
            ts = _timestamp(obj["timestamp"], where)
            n_in = _tokens(obj["input_tokens"], "input_tokens", where)
            n_out = _tokens(obj["output_tokens"], "output_tokens", where)
            raw_block = obj.get("block_size")
            block = _whole(raw_block, "block_size", where) if raw_block is not None else None
        hash_ids = tuple(_whole(h, "hash_ids", where, low=None) for h in obj.get("hash_ids") or ())
    except KeyError as e:
        fields = (
            "timestamp, input_length, output_length"
            if is_mooncake
            else "timestamp, input_tokens, output_tokens"
        )
        raise ConfigError(
            f"{p}:{lineno}: missing field {e.args[0]!r}; each line needs {fields}"
        ) from e
    except TypeError as e:
        raise ConfigError(f"{where}: 'hash_ids' must be a list of integers ({e})") from e
    if hash_ids and block is None:
        block = MOONCAKE_BLOCK_SIZE
    session = obj.get("session_id")
    return TraceRequest(
        timestamp_s=ts,
        input_tokens=n_in,
        output_tokens=n_out,
        hash_ids=hash_ids,
        block_size=block if hash_ids else None,
        session_id=str(session) if session is not None else None,
        model=obj.get("model"),
    )


def _read_azure(p: Path) -> list[TraceRequest]:
    out: list[TraceRequest] = []
    with _open(p, newline="") as f:
        reader = csv.DictReader(f)
        rows = iter(reader)
        while True:
            try:
                row = next(rows)
            except StopIteration:
                break
            except csv.Error as e:  # a field past csv.field_size_limit(), a NUL byte
                raise ConfigError(f"{p}:{reader.line_num}: not a CSV row ({e})") from e
            where = f"{p}:{reader.line_num}"
            _check_azure_columns(row, reader.fieldnames or (), where)
            try:
                ts = _parse_azure_time(row["TIMESTAMP"])
                n_in, n_out = int(row["ContextTokens"]), int(row["GeneratedTokens"])
            except (ValueError, OverflowError, OSError) as e:
                raise ConfigError(
                    f"{where}: expected TIMESTAMP,ContextTokens,GeneratedTokens ({e})"
                ) from e
            out.append(
                TraceRequest(
                    timestamp_s=_timestamp(ts, where),
                    input_tokens=_tokens(n_in, "ContextTokens", where),
                    output_tokens=_tokens(n_out, "GeneratedTokens", where),
                )
            )
    return out


def _check_azure_columns(row: dict[str, Any], header: Sequence[str], where: str) -> None:
    for column in _AZURE_COLUMNS:
        if column not in header:
            raise ConfigError(
                f"{where}: the header has no {column} column; an Azure trace's header is "
                "TIMESTAMP,ContextTokens,GeneratedTokens"
            )
        if row.get(column) is None:
            raise ConfigError(
                f"{where}: the row ends before its {column} column; each row needs "
                "TIMESTAMP,ContextTokens,GeneratedTokens"
            )


def _whole(value: Any, name: str, where: str, *, low: int | None = 1) -> int:
    """An integer field (a float only when it is whole), refusing bools and strings."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
        need = "an integer" if low is None else f"an integer of at least {low}"
        raise ConfigError(f"{where}: {name!r} must be {need}, got {value!r}")
    return value


def _tokens(value: Any, name: str, where: str) -> int:
    n = _whole(value, name, where)
    if n > MAX_REQUEST_TOKENS:
        raise ConfigError(
            f"{where}: {name!r} is {n} tokens; a request takes 1 to {MAX_REQUEST_TOKENS}"
        )
    return n


def _timestamp(value: Any, where: str, *, scale: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: 'timestamp' must be a number of seconds, got {value!r}")
    try:
        ts = float(value) * scale
    except OverflowError:
        ts = math.inf
    if not (math.isfinite(ts) and 0 <= ts <= MAX_TIMESTAMP_S):
        raise ConfigError(
            f"{where}: 'timestamp' {value!r} is out of range; use seconds from 0 to "
            f"{MAX_TIMESTAMP_S:g} (relative, or epoch)"
        )
    return ts


def _parse_azure_time(text: str) -> float:
    # The Azure files carry 7 fractional digits, more than datetime accepts.
    date, _, frac = text.strip().partition(".")
    base = datetime.fromisoformat(date).timestamp()
    return base + (float("0." + frac) if frac else 0.0)


def retime(
    trace: Trace,
    *,
    rate: float | None = None,
    time_scale: float | None = None,
    num_requests: int | None = None,
    seed: int = 0,
) -> Trace:
    """Cut and re-time a trace.

    Args:
        rate: replace the arrival times by a Poisson process of this many requests/s.
        time_scale: multiply the trace's own gaps (2.0 = twice as slow, 0.5 = twice the rate).
        num_requests: keep only the first N requests.
        seed: seed of the Poisson process.
    """
    reqs = list(trace.requests[:num_requests] if num_requests else trace.requests)
    if rate is not None:
        if not rate > 0:  # NaN included
            raise ConfigError(f"--rate must be a number greater than zero, got {rate}")
        gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=len(reqs))
        gaps[0] = 0.0
        times = np.cumsum(gaps)
        reqs = [replace(r, timestamp_s=float(t)) for r, t in zip(reqs, times, strict=True)]
    elif time_scale is not None:
        if not 0 < time_scale < math.inf:  # NaN included
            raise ConfigError(f"--time-scale must be a finite number above zero, got {time_scale}")
        reqs = [replace(r, timestamp_s=r.timestamp_s * time_scale) for r in reqs]
    return replace(trace, requests=tuple(reqs))
