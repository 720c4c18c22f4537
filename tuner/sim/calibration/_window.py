"""What an engine target served over a window, as the window calibration needs it: the
request count and rate, the prompt and output length histograms, and the measured TTFT and
TPOT histograms, read through the metrics contract (the store's samples or a query API).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from slotune.collector.errors import ConfigError
from slotune.collector.metrics import MetricsReader
from slotune.collector.store import TargetInfo, bucket_quantile
from slotune.collector.vocabulary import SourceKind

# Fewer requests give means noisier than the objective's tolerances (10 % on TPOT).
MIN_WINDOW_REQUESTS = 50
PROMPT, OUTPUT = "request_prompt_tokens", "request_generation_tokens"
# Per-request TPOT when the engine exports it; else the inter-token gaps, whose mean weighs
# each request by its output length.
TPOT_FAMILIES = ("tpot", "itl")
_ENGINE_KINDS = tuple(k.value for k in SourceKind if k.is_engine)


@dataclass(frozen=True, slots=True)
class WindowHistogram:
    """One histogram's increase over the window.

    Attributes:
        family: its canonical name (``ttft``, ``request_prompt_tokens`` ...).
        buckets: (upper bound, cumulative count), sorted by bound, ending at ``+Inf``.
        total: the increase of its sum (``<family>_sum``).
    """

    family: str
    buckets: tuple[tuple[float, float], ...]
    total: float

    @property
    def count(self) -> float:
        return self.buckets[-1][1]

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count > 0 else math.nan

    def quantile(self, q: float) -> float:
        """Prometheus' ``histogram_quantile`` over the buckets (NaN without observations)."""
        value = bucket_quantile(q, self.buckets)
        return math.nan if value is None else value

    def quantile_of(self, values: np.ndarray, q: float) -> float:
        """The same quantile of ``values`` put in these buckets, so that a simulated quantile
        carries the same interpolation error as the measured one."""
        finite = values[np.isfinite(values)]
        bounds = [b for b, _ in self.buckets]
        counts = [float(np.count_nonzero(finite <= b)) for b in bounds]
        value = bucket_quantile(q, list(zip(bounds, counts, strict=True)))
        return math.nan if value is None else value

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` whole lengths with the buckets' shares (each bucket's share of ``n`` drawn
        uniformly inside it, the ``+Inf`` bucket at its lower bound), scaled to the
        histogram's exact mean; each at least 1."""
        bounds = [b for b, _ in self.buckets]
        counts = np.diff([0.0, *(c for _, c in self.buckets)]).clip(min=0.0)
        shares = counts / counts.sum() * n
        per_bucket = np.floor(shares).astype(int)
        rest = np.argsort(-(shares - per_bucket), kind="stable")[: n - int(per_bucket.sum())]
        per_bucket[rest] += 1
        draws = []
        for i, k in enumerate(per_bucket):
            low = bounds[i - 1] if i > 0 else 0.0
            high = bounds[i] if math.isfinite(bounds[i]) else low
            draws.append(rng.uniform(low, high, size=k) if high > low else np.full(k, high))
        x = rng.permutation(np.concatenate(draws))
        if x.mean() > 0 and math.isfinite(self.mean):
            x = x * (self.mean / x.mean())
        lengths: np.ndarray = np.maximum(1, np.rint(x)).astype(np.int64)
        return lengths


@dataclass(frozen=True, slots=True)
class WindowTraffic:
    """What one engine target served over ``[start_ts, end_ts]``.

    Attributes:
        target: the target's name (``job/instance`` over a query API).
        model: the model its ``model_name`` label names, if any.
        prompt_tokens, output_tokens: prompt and output length per finished request.
        ttft: time to first token (seconds).
        tpot: per-request TPOT (``tpot``), or the inter-token gaps (``itl``) of engines
            without it; ``tpot.family`` says which.
    """

    target: str
    model: str | None
    start_ts: float
    end_ts: float
    prompt_tokens: WindowHistogram
    output_tokens: WindowHistogram
    ttft: WindowHistogram
    tpot: WindowHistogram

    @property
    def num_requests(self) -> int:
        return round(self.prompt_tokens.count)

    @property
    def rate_per_s(self) -> float:
        return self.prompt_tokens.count / (self.end_ts - self.start_ts)

    @property
    def tpot_mean_s(self) -> float:
        """Mean TPOT of the requests with two or more output tokens: vLLM observes a
        one-token request's TPOT as 0, so those are taken out of the per-request mean."""
        if self.tpot.family != "tpot":
            return self.tpot.mean
        single = next((c for b, c in self.output_tokens.buckets if b == 1.0), 0.0)
        decoding = self.tpot.count - single
        return self.tpot.total / decoding if decoding > 0 else math.nan

    def to_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "model": self.model,
            "start_ts": self.start_ts,
            "end_ts": self.end_ts,
            "num_requests": self.num_requests,
            "rate_per_s": self.rate_per_s,
            "mean_prompt_tokens": self.prompt_tokens.mean,
            "mean_output_tokens": self.output_tokens.mean,
            "mean_ttft_s": self.ttft.mean,
            "mean_tpot_s": self.tpot_mean_s,
            "tpot_family": self.tpot.family,
        }


def read_traffic(
    reader: MetricsReader, target: str, start_ts: float, end_ts: float
) -> WindowTraffic:
    """The window's traffic of the engine target named ``target``.

    Raises:
        ConfigError: no engine target of that name, a histogram the fit needs is missing
            (named), or the window holds fewer than ``MIN_WINDOW_REQUESTS`` requests.
        MetricsUnavailable: the query API cannot be read.
    """
    info = _engine_target(reader, target, end_ts)
    found: dict[str, WindowHistogram] = {}
    missing: list[str] = []
    for names in ((PROMPT,), (OUTPUT,), ("ttft",), TPOT_FAMILIES):
        histogram = next(
            (h for n in names if (h := _histogram(reader, target, n, start_ts, end_ts))), None
        )
        if histogram is None:
            missing.append(" or ".join(names))
        else:
            found[names[0]] = histogram
    counted = (
        found[PROMPT].count
        if PROMPT in found
        else reader.increase(target, "requests_finished", start_ts, end_ts)
    )
    if counted is not None and counted < MIN_WINDOW_REQUESTS:
        raise ConfigError(
            f"--target {target}: the window holds {round(counted)} finished requests; at "
            f"least {MIN_WINDOW_REQUESTS} are needed to calibrate; widen --window (or move "
            "--end) to a busier stretch"
        )
    if missing:
        raise ConfigError(
            f"--target {target}: the window has no {', '.join(missing)} histogram (with its "
            "_sum), which the fit needs; calibrate on a vLLM target, or give --observed FILE "
            "or --run ID"
        )
    return WindowTraffic(
        target=target,
        model=info.model,
        start_ts=start_ts,
        end_ts=end_ts,
        prompt_tokens=found[PROMPT],
        output_tokens=found[OUTPUT],
        ttft=found["ttft"],
        tpot=found["tpot"],
    )


def _engine_target(reader: MetricsReader, name: str, at_ts: float) -> TargetInfo:
    engines = [t for t in reader.targets(at_ts) if t.kind in _ENGINE_KINDS]
    for t in engines:
        if t.name == name:
            return t
    known = ", ".join(t.name for t in engines) or "none"
    raise ConfigError(
        f"--target {name!r}: no engine target of that name (engine targets: {known}); "
        "see `slotune targets list`"
    )


def _histogram(
    reader: MetricsReader, target: str, family: str, start_ts: float, end_ts: float
) -> WindowHistogram | None:
    """The histogram's increase over the window; None without buckets or a sum."""
    buckets = tuple(sorted(reader.bucket_increases(target, family, start_ts, end_ts).items()))
    if not buckets or not math.isinf(buckets[-1][0]):
        return None
    total = reader.increase(target, f"{family}_sum", start_ts, end_ts)
    if total is None:
        return None
    return WindowHistogram(family, buckets, total)
