"""The metrics a threshold rule can watch, per target.

- every canonical gauge (``kv_usage``, ``requests_waiting``, ``vram_used``,
  ``temperature_celsius`` ...) and ``up``: the newest value;
- ``queue_length``: ``requests_waiting``; ``xid``: DCGM's last XID error code
  (``DCGM_FI_DEV_XID_ERRORS``, 0 when none);
- ``vram_usage``: ``vram_used / vram_total`` (0..1);
- ``prefix_hit_rate``: prefix-cache hits / queries over the rate window (the engine's own
  gauge where it has no counters);
- ``scrape_age_s``: seconds since the target's newest ``up`` sample, which grows once the
  agent or its scrapes of the target stop (Prometheus ``time() - timestamp(up)``; the rule
  that pages on a dead agent, where every other rule of the target has no data);
- ``<counter>_rate`` for every canonical counter (``preemptions_rate``; also spelled
  ``preemption_rate``): per-second increase over the rate window.

A target with several series of a metric (GPUs, data-parallel engines) is judged by its
worst one: the largest for ``>``, ``>=``, ``==``, ``!=``; the smallest for ``<``, ``<=``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from slotune.collector.agent.base import MetricType
from slotune.collector.agent.canonical import CANONICAL
from slotune.collector.errors import ConfigError


class MetricKind(StrEnum):
    GAUGE = "gauge"  # newest value of ``series[0]``
    RATE = "rate"  # increase of ``series[0]`` per second over the rate window
    RATIO = "ratio"  # newest ``series[0]`` / newest ``series[1]``
    HIT_RATIO = "hit_ratio"  # increase of ``series[0]`` / of ``series[1]`` (gauge fallback)
    AGE = "age"  # seconds since the newest sample of ``series[0]``; never stale itself


@dataclass(frozen=True, slots=True)
class MetricDef:
    """How a rule's metric is read from stored series."""

    name: str
    kind: MetricKind
    series: tuple[str, ...]
    fallback_gauge: str | None = None


def _known() -> dict[str, MetricDef]:
    out: dict[str, MetricDef] = {"up": MetricDef("up", MetricKind.GAUGE, ("up",))}
    for m in CANONICAL.values():
        if m.type is MetricType.GAUGE:
            out[m.name] = MetricDef(m.name, MetricKind.GAUGE, (m.name,))
        elif m.type is MetricType.COUNTER:
            out[f"{m.name}_rate"] = MetricDef(f"{m.name}_rate", MetricKind.RATE, (m.name,))
    out["scrape_age_s"] = MetricDef("scrape_age_s", MetricKind.AGE, ("up",))
    out["queue_length"] = MetricDef("queue_length", MetricKind.GAUGE, ("requests_waiting",))
    out["xid"] = MetricDef("xid", MetricKind.GAUGE, ("DCGM_FI_DEV_XID_ERRORS",))
    out["vram_usage"] = MetricDef("vram_usage", MetricKind.RATIO, ("vram_used", "vram_total"))
    out["preemption_rate"] = MetricDef("preemption_rate", MetricKind.RATE, ("preemptions",))
    out["prefix_hit_rate"] = MetricDef(
        "prefix_hit_rate",
        MetricKind.HIT_RATIO,
        ("prefix_hits", "prefix_queries"),
        fallback_gauge="prefix_hit_rate",
    )
    return out


METRICS: dict[str, MetricDef] = _known()


def metric_def(name: str) -> MetricDef:
    """The definition of a rule metric.

    Raises:
        ConfigError: the name is unknown (the message lists the known names).
    """
    found = METRICS.get(name)
    if found is None:
        raise ConfigError(
            f"unknown metric {name!r}; known: {', '.join(sorted(METRICS))} (see docs/alerts.md)"
        )
    return found
