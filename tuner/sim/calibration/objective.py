"""How a calibration is judged: one score over TTFT, TPOT and E2E.

For a set of measured requests and the simulator's prediction of the same requests, each of
six statistics (the mean and the 90th percentile of TTFT, TPOT and E2E) gets its error as
the absolute log ratio of simulated to measured, divided by its tolerance: ``log 1.2`` for
the TTFT mean, ``log 1.1`` for the TPOT and E2E means, ``log 1.25`` for every p90. The score
is the largest of the six, so 1.0 means every statistic is at its tolerance and a fit can
only lower the score by improving the metric that is worst, never by trading one metric for
another. A fit is kept when its score on held-back requests is below the uncalibrated one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

METRICS = ("ttft", "tpot", "e2e")
STATISTICS = ("mean", "p90")
TOLERANCE = {
    ("ttft", "mean"): 0.20,
    ("tpot", "mean"): 0.10,
    ("e2e", "mean"): 0.10,
    ("ttft", "p90"): 0.25,
    ("tpot", "p90"): 0.25,
    ("e2e", "p90"): 0.25,
}
# What a request the simulated engine failed counts as: slower than any real one.
_FAILED_S = 1e6


@dataclass(frozen=True, slots=True)
class Errors:
    """Signed relative errors of simulated vs measured statistics (0.1 = simulation 10 %
    high) and the score they give.

    Attributes:
        ttft, tpot, e2e: errors of the means.
        ttft_p90, tpot_p90, e2e_p90: errors of the 90th percentiles.
        score: the objective (module docstring); NaN when nothing could be compared.
        num_requests: requests compared.
    """

    ttft: float
    tpot: float
    e2e: float
    ttft_p90: float
    tpot_p90: float
    e2e_p90: float
    score: float
    num_requests: int

    def to_dict(self) -> dict[str, float | int]:
        return {
            "ttft": self.ttft,
            "tpot": self.tpot,
            "e2e": self.e2e,
            "ttft_p90": self.ttft_p90,
            "tpot_p90": self.tpot_p90,
            "e2e_p90": self.e2e_p90,
            "score": self.score,
            "num_requests": self.num_requests,
        }


def _statistic(values: np.ndarray, statistic: str) -> float:
    return float(values.mean() if statistic == "mean" else np.percentile(values, 90))


def errors(simulated: dict[str, np.ndarray], measured: dict[str, np.ndarray]) -> Errors:
    """Errors and score of simulated vs measured per-request values (aligned arrays per
    metric, NaN where a value is missing; a request the simulation failed counts as
    slower than any real one)."""
    signed: dict[tuple[str, str], float] = {}
    for metric in METRICS:
        real, sim = measured[metric], simulated[metric]
        known = np.isfinite(real) & (real > 0)
        sim_known = np.where(np.isfinite(sim[known]), sim[known], _FAILED_S)
        for statistic in STATISTICS:
            if not known.any():
                signed[metric, statistic] = math.nan
                continue
            ratio = _statistic(sim_known, statistic) / _statistic(real[known], statistic)
            signed[metric, statistic] = ratio - 1.0
    normalised = [
        abs(math.log1p(e)) / math.log1p(TOLERANCE[key]) if e > -1.0 else math.inf
        for key, e in signed.items()
        if not math.isnan(e)
    ]
    return Errors(
        ttft=signed["ttft", "mean"],
        tpot=signed["tpot", "mean"],
        e2e=signed["e2e", "mean"],
        ttft_p90=signed["ttft", "p90"],
        tpot_p90=signed["tpot", "p90"],
        e2e_p90=signed["e2e", "p90"],
        score=max(normalised) if normalised else math.nan,
        num_requests=int(measured["e2e"].size),
    )
