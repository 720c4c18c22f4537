"""Synthetic workloads: request lengths drawn from a distribution given as a short spec.

Spec grammar (``--input-len`` / ``--output-len``)::

    512  (or fixed:512)      fixed
    uniform:128,1024         integers in [128, 1024]
    normal:512,64            mean, standard deviation
    lognormal:6.2,0.8        mu, sigma of the natural log (median e^mu = 493)
    empirical:azure-conv     lengths resampled from a bundled trace (or a trace file path)

Every draw is rounded to an integer and clipped to 1 .. MAX_REQUEST_TOKENS (1,048,576); the
parameters themselves must be finite and put the distribution's centre in that range.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.collector.workload.traces import (
    MAX_REQUEST_TOKENS,
    NAMED_WORKLOADS,
    Trace,
    TraceRequest,
    load_trace,
    named_workload,
)

SPEC_FORMS = "512, uniform:128,1024, normal:512,64, lognormal:6.2,0.8 or empirical:azure-conv"


class LengthKind(StrEnum):
    FIXED = "fixed"
    UNIFORM = "uniform"
    NORMAL = "normal"
    LOGNORMAL = "lognormal"
    EMPIRICAL = "empirical"


class Column(StrEnum):
    """Which length of a trace an empirical distribution resamples."""

    INPUT = "input"
    OUTPUT = "output"


_ARITY = {LengthKind.FIXED: 1, LengthKind.UNIFORM: 2, LengthKind.NORMAL: 2, LengthKind.LOGNORMAL: 2}


@dataclass(frozen=True, slots=True)
class LengthSpec:
    """A parsed length distribution.

    Attributes:
        kind: the distribution family.
        params: its numbers (fixed: n; uniform: low, high; normal: mean, std;
            lognormal: mu, sigma); empty for empirical.
        source: bundled trace name or trace file path (empirical only).
        column: input or output lengths of that trace (empirical only).
        text: the spec as written.
    """

    kind: LengthKind
    params: tuple[float, ...] = ()
    source: str | None = None
    column: Column = Column.INPUT
    text: str = ""

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` integer lengths, each at least 1."""
        if self.kind is LengthKind.FIXED:
            x = np.full(n, self.params[0])
        elif self.kind is LengthKind.UNIFORM:
            x = rng.integers(int(self.params[0]), int(self.params[1]), size=n, endpoint=True)
        elif self.kind is LengthKind.NORMAL:
            x = rng.normal(self.params[0], self.params[1], size=n)
        elif self.kind is LengthKind.LOGNORMAL:
            x = rng.lognormal(self.params[0], self.params[1], size=n)
        else:
            assert self.source is not None
            x = rng.choice(_empirical_values(self.source, self.column), size=n, replace=True)
        lengths: np.ndarray = np.rint(np.clip(x, 1, MAX_REQUEST_TOKENS)).astype(np.int64)
        return lengths


@functools.lru_cache(maxsize=8)
def _empirical_values(source: str, column: Column) -> np.ndarray:
    """One length column of a bundled trace or trace file (read once per process)."""
    trace = named_workload(source) if source in NAMED_WORKLOADS else load_trace(source)
    attr = "input_tokens" if column is Column.INPUT else "output_tokens"
    return np.array([getattr(r, attr) for r in trace.requests], dtype=np.int64)


def parse_length_spec(
    text: str, *, column: Column = Column.INPUT, field_name: str = "--input-len"
) -> LengthSpec:
    """Parse a length spec (see the module docstring).

    Raises:
        ConfigError: naming the flag and the accepted forms.
    """
    raw = str(text).strip()
    head, sep, rest = raw.partition(":")
    kind_text = head.lower() if sep else LengthKind.FIXED.value
    try:
        kind = LengthKind(kind_text)
    except ValueError:
        raise ConfigError(
            f"{field_name} {raw!r}: unknown distribution {head!r}; write one of {SPEC_FORMS}"
        ) from None
    if kind is LengthKind.EMPIRICAL:
        return _empirical(raw, rest.strip(), column, field_name)
    numbers = rest if sep else raw
    try:
        params = tuple(float(p) for p in numbers.split(","))
    except ValueError:
        raise ConfigError(
            f"{field_name} {raw!r}: expected numbers; write one of {SPEC_FORMS}"
        ) from None
    if len(params) != _ARITY[kind]:
        raise ConfigError(
            f"{field_name} {raw!r}: {kind.value} takes {_ARITY[kind]} "
            f"number(s); write one of {SPEC_FORMS}"
        )
    _check_params(kind, params, raw, field_name)
    return LengthSpec(kind=kind, params=params, column=column, text=raw)


# lognormal: the median e^mu must be a length a request can have; sigma beyond this puts
# most of the mass at the clipping bounds.
_MAX_LOG_MU = math.log(MAX_REQUEST_TOKENS)
_MAX_LOG_SIGMA = 5.0


def _check_params(kind: LengthKind, params: tuple[float, ...], raw: str, field_name: str) -> None:
    low_or_mean, second = params[0], params[-1]
    top = MAX_REQUEST_TOKENS
    bad = (
        not all(math.isfinite(x) for x in params)
        or {
            LengthKind.FIXED: not (1 <= low_or_mean <= top and float(low_or_mean).is_integer()),
            LengthKind.UNIFORM: not 1 <= low_or_mean <= second <= top,
            LengthKind.NORMAL: not (1 <= low_or_mean <= top and 0 <= second <= top),
            LengthKind.LOGNORMAL: not (
                0 <= low_or_mean <= _MAX_LOG_MU and 0 <= second <= _MAX_LOG_SIGMA
            ),
        }[kind]
    )
    if bad:
        hint = {
            LengthKind.FIXED: f"a whole number of tokens from 1 to {top}",
            LengthKind.UNIFORM: f"1 <= low <= high <= {top}",
            LengthKind.NORMAL: f"1 <= mean <= {top} and 0 <= std <= {top}",
            LengthKind.LOGNORMAL: f"0 <= mu <= {_MAX_LOG_MU:.2f} (median e^mu up to {top}) "
            f"and 0 <= sigma <= {_MAX_LOG_SIGMA:g}",
        }[kind]
        raise ConfigError(f"{field_name} {raw!r}: needs finite numbers, {hint}")


def _empirical(raw: str, source: str, column: Column, field_name: str) -> LengthSpec:
    if not source:
        raise ConfigError(f"{field_name} {raw!r}: name a trace, e.g. empirical:azure-conv")
    if source not in NAMED_WORKLOADS and not Path(source).is_file():
        raise ConfigError(
            f"{field_name} {raw!r}: {source!r} is neither a bundled trace "
            f"({', '.join(NAMED_WORKLOADS)}) nor a trace file"
        )
    return LengthSpec(kind=LengthKind.EMPIRICAL, source=source, column=column, text=raw)


def synthetic_trace(
    input_len: LengthSpec,
    output_len: LengthSpec,
    num_requests: int,
    *,
    seed: int = 0,
    shared_prefix_tokens: int = 0,
    turns: int = 1,
) -> Trace:
    """A trace of ``num_requests`` requests with lengths drawn from two specs.

    Arrival times are all zero: the load generator's arrival process sets them.

    Args:
        input_len: per-turn new prompt tokens.
        output_len: tokens to generate.
        num_requests: how many requests.
        seed: seed of the draws.
        shared_prefix_tokens: a common system prompt of this many tokens in front of every
            conversation (included in ``input_tokens``).
        turns: requests per conversation. Conversations are interleaved (every conversation's
            turn k comes before any turn k+1) and each turn's prompt holds the whole history
            (prefix, earlier questions and answers) plus its new question.
    """
    if num_requests < 1:
        raise ConfigError("--num-requests must be at least 1")
    if turns < 1:
        raise ConfigError("--turns must be at least 1")
    if shared_prefix_tokens < 0:
        raise ConfigError("--shared-prefix must be zero or more tokens")
    rng = np.random.default_rng(seed)
    new_in = input_len.sample(num_requests, rng)
    out = output_len.sample(num_requests, rng)
    num_sessions = -(-num_requests // turns)
    history = [shared_prefix_tokens] * num_sessions
    requests: list[TraceRequest] = []
    for i in range(num_requests):
        s = i % num_sessions
        total_in = history[s] + int(new_in[i])
        requests.append(
            TraceRequest(
                timestamp_s=0.0,
                input_tokens=total_in,
                output_tokens=int(out[i]),
                session_id=f"session-{s}" if turns > 1 else None,
            )
        )
        history[s] = total_in + int(out[i])
        if total_in > MAX_REQUEST_TOKENS:
            raise ConfigError(
                f"turn prompts grow to {total_in} tokens (prefix + earlier turns); a request "
                f"takes at most {MAX_REQUEST_TOKENS}: lower --turns or the lengths"
            )
    name = f"synthetic(in={input_len.text},out={output_len.text}"
    name += f",prefix={shared_prefix_tokens}" if shared_prefix_tokens else ""
    name += f",turns={turns})" if turns > 1 else ")"
    return Trace(name=name, requests=tuple(requests), source="synthetic")
