"""Service-level objectives: the shorthand, the YAML spec and per-request SLIs.

One SLO object serves three uses: a tuning constraint, a goodput criterion and an alert.
"p99 <= X" and "99 % of requests within X" are one SLI: a request is *good* when its value
is within the threshold, and the SLO holds when the good fraction reaches the objective.

Shorthand (command line)::

    ttft:p99<=500ms   itl:p95<=50ms   tpot:p90<=40ms   e2e:p99<=20s   error_rate<=1%

The event each SLI counts is the one the engine's own histogram counts, so tuning, goodput
and alerting compute the same number: a request for ``ttft``, ``tpot`` and ``e2e`` (its own
value), a token gap for ``itl`` (pooled over every token of every completed request, as
``vllm:inter_token_latency_seconds``; a request alone never breaks an ``itl`` SLO, the run as
a whole does), a request's outcome for ``error_rate``.

The record is in ``_model``, the shorthand in ``_shorthand``, the YAML file in ``_file`` and
the maths over requests in ``_attainment``; callers import from this package.
"""

from slotune.collector.slo._attainment import Attainment, evaluate, pooled_itl_gaps
from slotune.collector.slo._file import load_slo_file, parse_slo_yaml
from slotune.collector.slo._model import (
    NAME_RE,
    SLI,
    SLO,
    Alerting,
    BurnWindow,
    Selector,
    default_name,
)
from slotune.collector.slo._shorthand import (
    MAX_LATENCY_THRESHOLD_S,
    MAX_WINDOW_S,
    MIN_WINDOW_S,
    SHORTHAND_FORMS,
    check_unique,
    parse_slo,
    parse_slos,
)

__all__ = [
    "MAX_LATENCY_THRESHOLD_S",
    "MAX_WINDOW_S",
    "MIN_WINDOW_S",
    "NAME_RE",
    "SHORTHAND_FORMS",
    "SLI",
    "SLO",
    "Alerting",
    "Attainment",
    "BurnWindow",
    "Selector",
    "check_unique",
    "default_name",
    "evaluate",
    "load_slo_file",
    "parse_slo",
    "parse_slo_yaml",
    "parse_slos",
    "pooled_itl_gaps",
]
