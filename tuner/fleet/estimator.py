"""Expected output length of a request before it starts, for routing long generations early.

``max_tokens`` when the client gave one (a real engine may stop earlier, never later); else a
running quantile of the output lengths already observed for the same model and client key,
falling back to the model's, then to a prior. Quantiles come from a log-bucketed histogram
(relative error ``gamma - 1``, constant memory per key), so the estimator never grows with
the traffic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from slotune.collector.errors import ConfigError

# Buckets 2 % wide: 10 to 100k tokens fit in about 470 buckets per key.
_GAMMA = 1.02
_LOG_GAMMA = math.log(_GAMMA)
# Observations a key needs before its own quantile replaces the model's (or the prior).
MIN_OBSERVATIONS = 20
DEFAULT_PRIOR_TOKENS = 256.0


@dataclass(slots=True)
class _Histogram:
    """Counts of output lengths in log buckets (bucket ``i`` holds ``(gamma^(i-1), gamma^i]``)."""

    counts: dict[int, int] = field(default_factory=dict)
    total: int = 0

    def add(self, tokens: int) -> None:
        i = math.ceil(math.log(max(tokens, 1)) / _LOG_GAMMA)
        self.counts[i] = self.counts.get(i, 0) + 1
        self.total += 1

    def quantile(self, q: float) -> float:
        rank = q * (self.total - 1)
        seen = 0
        for i in sorted(self.counts):
            seen += self.counts[i]
            if seen > rank:
                # the bucket's midpoint in log space: within gamma's relative error
                return float(_GAMMA ** (i - 0.5))
        raise AssertionError("unreachable: the histogram is not empty")


class OutputLengthEstimator:
    """Running output-length quantiles per model and per (model, client key).

    Args:
        quantile: which quantile a request is expected to reach (0.5 = the median; a router
            that would rather over-estimate long generations picks a higher one).
        prior_tokens: the estimate before anything was observed.
    """

    def __init__(self, quantile: float = 0.5, prior_tokens: float = DEFAULT_PRIOR_TOKENS) -> None:
        if not 0.0 < quantile < 1.0:
            raise ConfigError(f"output-length quantile {quantile}: use a value in (0, 1)")
        self.quantile = quantile
        self.prior_tokens = prior_tokens
        self._by_model: dict[str, _Histogram] = {}
        self._by_client: dict[tuple[str, str], _Histogram] = {}

    def expected(self, model: str, client_key: str | None, max_tokens: int | None) -> float:
        """Expected output tokens of a request that has not started yet."""
        if max_tokens is not None:
            return float(max_tokens)
        if client_key is not None:
            h = self._by_client.get((model, client_key))
            if h is not None and h.total >= MIN_OBSERVATIONS:
                return h.quantile(self.quantile)
        h = self._by_model.get(model)
        if h is not None and h.total >= MIN_OBSERVATIONS:
            return h.quantile(self.quantile)
        return self.prior_tokens

    def observe(self, model: str, client_key: str | None, output_tokens: int) -> None:
        """Learn one finished request's output length."""
        self._by_model.setdefault(model, _Histogram()).add(output_tokens)
        if client_key is not None:
            self._by_client.setdefault((model, client_key), _Histogram()).add(output_tokens)
