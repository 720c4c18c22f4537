"""How far the emulated engine falls behind real time, and whether its measurements hold.

The emulated engine ends each scheduler step at a deadline: the step's emulated duration
divided by the speedup after it began. A process that does not get the CPU at a deadline (a
loaded machine) sends that step's tokens late, and every latency measured then grows by the
lag: by the lag times the speedup once a client scales its figures back to GPU time, in the
engine's own histograms as well. So the engine measures, for every step, how long after its
deadline its tokens went out (``lag_s``, real seconds). A step is **late** when that lag, in
emulated GPU time (lag x speedup), exceeds ``LATE_STEP_S``: about one decode step of an 8B
model on an H100 (vLLM's mean ITL is 9-11 ms there), so a late step reads as a doubled token
gap. A measurement is **trustworthy** while at most
``MAX_LATE_SHARE`` of its steps were late, since an ``itl:p99`` SLO is decided by the slowest
1 % of gaps.

The engine serves the figures on its Prometheus endpoint (its face's ``prometheus_path``:
``/metrics``, or ``/prometheus/metrics`` for TensorRT-LLM):

- ``slotune_emulator_step_lag_seconds`` (histogram): each step's lag, real seconds;
- ``slotune_emulator_late_steps_total`` (counter): the late steps among them.

:func:`~.lag_client.fetch_lag` reads them back into a :class:`LagReport`; a real engine
serves neither, and reads as None.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.parser import text_string_to_metric_families

from slotune.tuner.emulate.events import FinishedRequest, StepReport

LATE_STEP_S = 0.010
MAX_LATE_SHARE = 0.01
LAG_FAMILY = "slotune_emulator_step_lag_seconds"
LATE_FAMILY = "slotune_emulator_late_steps"
_LAG_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_WARN_EVERY_S = 10.0

log = logging.getLogger("slotune.emulate")


@dataclass(frozen=True, slots=True)
class LagReport:
    """The emulated engine's steps so far and how many of them ran late."""

    num_steps: int
    num_late_steps: int

    @property
    def late_share(self) -> float:
        return self.num_late_steps / self.num_steps if self.num_steps else 0.0

    @property
    def is_trustworthy(self) -> bool:
        """Whether latencies measured over these steps are the emulated GPU's, not the host's."""
        return self.late_share <= MAX_LATE_SHARE

    def describe(self) -> str:
        """One line for a person: how many steps were late, and what that means."""
        share = f"{self.num_late_steps:,} of {self.num_steps:,} steps ({self.late_share:.1%})"
        if self.is_trustworthy:
            return f"the emulated engine kept up with real time: {share} late"
        return (
            f"the emulated engine fell behind real time: {share} ran more than "
            f"{LATE_STEP_S * 1000:g} ms of GPU time late (the host was short of CPU), so its "
            "latencies are inflated and the measurement is not trustworthy"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_steps": self.num_steps,
            "num_late_steps": self.num_late_steps,
            "late_share": self.late_share,
            "is_trustworthy": self.is_trustworthy,
        }


class LagMonitor:
    """Counts late steps of one real-time loop.

    Args:
        time_scale: the speedup (emulated seconds per real second).
    """

    def __init__(self, time_scale: float) -> None:
        self._late_after_s = LATE_STEP_S / time_scale
        self._num_steps = 0
        self._num_late = 0

    def observe(self, lag_s: float) -> bool:
        """Count one step that ended ``lag_s`` real seconds after its deadline; is it late?"""
        self._num_steps += 1
        is_late = lag_s > self._late_after_s
        self._num_late += is_late
        return is_late

    def report(self) -> LagReport:
        return LagReport(self._num_steps, self._num_late)


class LagMetrics:
    """The lag families in an exporter's registry, and a warning in the log while steps run late.

    An engine observer: it reads ``lag_s`` and ``is_late`` off each step report.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._lag = Histogram(
            LAG_FAMILY,
            "Real seconds each scheduler step's tokens went out after the step's emulated end.",
            registry=registry,
            buckets=_LAG_BUCKETS,
        )
        self._late = Counter(
            LATE_FAMILY,
            f"Steps that ran more than {LATE_STEP_S * 1000:g} ms of emulated GPU time late.",
            registry=registry,
        )
        self._last_warning = -_WARN_EVERY_S
        self._late_since_warning = 0

    def on_step(self, report: StepReport) -> None:
        self._lag.observe(report.lag_s)
        if not report.is_late:
            return
        self._late.inc()
        self._late_since_warning += 1
        now = time.monotonic()
        if now - self._last_warning >= _WARN_EVERY_S:
            log.warning(
                "late scheduler steps: %d (the last by %.1f ms of real time): the host is "
                "short of CPU, and latencies measured now are inflated",
                self._late_since_warning,
                report.lag_s * 1000,
            )
            self._last_warning = now
            self._late_since_warning = 0

    def on_finished(self, request: FinishedRequest) -> None:
        pass


def read_lag(metrics_text: str) -> LagReport | None:
    """The lag figures in a Prometheus exposition; None when it has none (a real engine)."""
    num_steps = num_late = None
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == LAG_FAMILY + "_count":
                num_steps = int(sample.value)
            elif sample.name == LATE_FAMILY + "_total":
                num_late = int(sample.value)
    if num_steps is None or num_late is None:
        return None
    return LagReport(num_steps, num_late)
