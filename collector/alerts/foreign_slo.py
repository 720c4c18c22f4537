"""What the foreign SLO formats (OpenSLO, Sloth, Pyrra) share: slotune's SLO records built from
a target and a threshold, and the engine metric a PromQL query names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from slotune.collector.alerts.promrules import ENGINE_RULES
from slotune.collector.slo import SLI, SLO, Selector, parse_slo

_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_MATCHER_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"')


def error_slo(name: str, target: float, window_s: float, selector: Selector) -> SLO:
    return parse_slo(
        f"error_rate<={(1 - target) * 100:.10g}%", name=name, window_s=window_s, selector=selector
    )


def latency_slo(
    name: str, sli: SLI, threshold_s: float, target: float, window_s: float, selector: Selector
) -> SLO:
    spec = f"{sli.value}:p{target * 100:.10g}<={threshold_s * 1000:.10g}ms"
    slo = parse_slo(spec, name=name, window_s=window_s, selector=selector)
    return replace(slo, objective=target)


def _known_metrics() -> dict[str, str]:
    """Raw engine metric name -> canonical name (histogram families and counters)."""
    return {r.source: r.target for rules in ENGINE_RULES.values() for r in rules}


NO_ENGINE_METRIC = (
    "no engine metric slotune knows (e.g. vllm:time_to_first_token_seconds_bucket, "
    "vllm:request_success_total)"
)


def engine_metric(query: str) -> tuple[str, dict[str, str]] | None:
    """The first engine metric a PromQL query names that maps onto a slotune SLI, as
    (``ttft`` / ``itl`` / ``tpot`` / ``e2e`` / ``requests_finished``, its label matchers)."""
    known = _known_metrics()
    for name in _NAME_RE.findall(query):
        base = re.sub(r"_(bucket|count|sum)$", "", name)
        canonical = known.get(name) or known.get(base)
        if canonical in ("ttft", "itl", "tpot", "e2e", "requests_finished"):
            return canonical, dict(_MATCHER_RE.findall(query))
    return None


def engine_selector(matchers: Mapping[str, str]) -> Selector:
    return Selector(
        model=matchers.get("model_name"), target=matchers.get("instance"), pool=matchers.get("pool")
    )
