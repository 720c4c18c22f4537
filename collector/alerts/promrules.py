"""SLOs as a Prometheus rule file: recording rules per window, alerting rules per severity.

For each SLO and each window of its policy, a recording rule

    slotune:slo_error_ratio:<window>{slo="<name>"} = 1 - good / total

where good and total are ``sum(increase(...[window]))`` of the engine's own series (the
bucket at the threshold and the ``+Inf`` bucket; for ``error_rate``, the engine's count of
finished requests by ``finished_reason``, or, for an engine that counts its failed requests
apart (SGLang), failed over finished plus failed) — the same ratio the evaluator computes from
the store (Prometheus' extrapolation scales good and total alike, so their ratio is unchanged).
One alerting rule per severity, ``SLOErrorBudgetBurn{slo, severity}``, fires when any of
that severity's (long, short) pairs both exceed ``factor x (1 - objective)``.

The threshold must be a bucket bound, or the ``le`` matcher selects nothing and the alert
never fires. Bounds come from the engine's own metric definitions
(``collector.engine_buckets``; for SGLang, whose bounds are a server option, from what the
agent scraped): a threshold between two bounds is snapped to the one below (conservative) or
interpolated (``interpolate: true``), and the export says so.

Selectors become label matchers: ``model`` → ``model_name``, ``target`` → ``instance``,
``pool`` → ``pool``. No engine exports a ``pool`` label, and ``instance`` is Prometheus'
``host:port``: the export names the relabelling a user must add for each.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from slotune.collector.agent.canonical import Rule, format_le
from slotune.collector.agent.promsource import PromTextSource
from slotune.collector.agent.registry import SOURCES
from slotune.collector.alerts.policy import burn_windows, error_budget
from slotune.collector.alerts.sli import BAD_REASONS, SliReader
from slotune.collector.alerts.slo_rules import load_slos
from slotune.collector.engine_buckets import engine_bounds
from slotune.collector.errors import ConfigError
from slotune.collector.slo import SLI, SLO
from slotune.collector.store import Store

# engine kind -> the source whose series the rules read
_ENGINES: dict[str, type[PromTextSource]] = {
    kind.value: cls
    for kind, cls in SOURCES.items()
    if kind.is_engine and issubclass(cls, PromTextSource)
}
ENGINE_RULES: dict[str, tuple[Rule, ...]] = {e: cls.export_rules() for e, cls in _ENGINES.items()}
ALERT_NAME = "SLOErrorBudgetBurn"
_SELECTOR_LABELS = (("model", "model_name"), ("target", "instance"), ("pool", "pool"))


@dataclass(frozen=True, slots=True)
class RuleExport:
    """A Prometheus rule file and what a user must know before deploying it.

    Attributes:
        text: the rule file (YAML; the notes are repeated at its top as comments).
        notes: one line per threshold moved to a bucket bound and per label the engine's
            series need through relabelling.
    """

    text: str
    notes: tuple[str, ...]


def record_name(window_s: float) -> str:
    return f"slotune:slo_error_ratio:rate{prom_duration(window_s)}"


def prom_duration(seconds: float) -> str:
    """A Prometheus duration (``5m``, ``1h``, ``3d``; milliseconds when not whole seconds)."""
    ms = round(seconds * 1000)
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _engine(engine: str) -> type[PromTextSource]:
    source = _ENGINES.get(engine)
    if source is None:
        raise ConfigError(f"--engine {engine!r} is unknown; use {', '.join(_ENGINES)}")
    return source


def engine_rule(engine: str, canonical: str) -> Rule:
    """The rule of ``engine`` that maps its raw series onto ``canonical``.

    Raises:
        ConfigError: an unknown engine, or one without that metric.
    """
    rules = _engine(engine).export_rules()
    found = next((r for r in rules if r.target == canonical), None)
    if found is None:
        raise ConfigError(
            f"{engine} exports no {canonical} metric, so an SLO on it cannot be written as a "
            f"Prometheus rule for {engine}; pick another --engine or leave the SLO out"
        )
    return found


def _matchers(slo: SLO, extra: str = "") -> str:
    sel = slo.selector.as_dict()
    parts = [f'{label}="{sel[key]}"' for key, label in _SELECTOR_LABELS if key in sel]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}"


def _increase(series: str, matchers: str, window: str) -> str:
    return f"sum(increase({series}{matchers}[{window}]))"


def error_ratio_expr(slo: SLO, engine: str, window_s: float, bounds: Sequence[float] = ()) -> str:
    """PromQL for the SLO's error ratio over a window on ``engine``'s series.

    Args:
        slo: the SLO.
        engine: an engine's source kind (``vllm``, ``sglang`` ...).
        window_s: the window.
        bounds: the histogram's finite bucket bounds in seconds (see :func:`histogram_bounds`);
            required for a latency SLO.

    Raises:
        ConfigError: the engine lacks the metric, or no bucket bounds are known.
    """
    w = prom_duration(window_s)
    if slo.sli is SLI.ERROR_RATE:
        return _error_ratio(slo, engine, w)
    rule = engine_rule(engine, slo.sli.value)
    bucket = f"{rule.source}_bucket"

    def at(bound: float) -> str:
        return _increase(bucket, _matchers(slo, f'le="{format_le(bound / rule.scale)}"'), w)

    lower, upper = _nearest(slo, _finite(slo, engine, bounds))
    total = at(math.inf)
    if lower is None:
        return f"{total} / {total}"  # below the first bound: no request can count as good
    good = at(lower)
    if slo.interpolate and lower != slo.threshold and upper is not None:
        frac = (slo.threshold - lower) / (upper - lower)
        good = f"({good} + ({at(upper)} - {good}) * {frac:g})"
    return f"1 - {good} / {total}"


def _error_ratio(slo: SLO, engine: str, window: str) -> str:
    outcomes = _engine(engine).outcomes
    if outcomes is None:
        raise ConfigError(
            f"{engine} exports no count of finished requests, so error_rate cannot be written "
            f"as a Prometheus rule for {engine}; pick another --engine or leave the SLO out"
        )
    finished = _increase(outcomes.finished, _matchers(slo), window)
    if not outcomes.failed:
        reasons = "|".join(sorted(BAD_REASONS))
        bad = _increase(outcomes.finished, _matchers(slo, f'finished_reason=~"{reasons}"'), window)
        return f"{bad} / {finished}"
    # the failed counter has no series before the first failure: none failed yet
    failed = f"({_increase(outcomes.failed, _matchers(slo), window)} or vector(0))"
    return f"{failed} / ({failed} + {finished})"


def _finite(slo: SLO, engine: str, bounds: Sequence[float]) -> list[float]:
    finite = sorted(b for b in bounds if not math.isinf(b))
    if not finite:
        raise ConfigError(
            f"SLO {slo.name!r}: the bucket bounds of {engine}'s {slo.sli.value} histogram are "
            "not known (they are a server option); run `slotune agent` against the engine "
            "first, so the export uses the bounds it scraped"
        )
    return finite


def _nearest(slo: SLO, finite: Sequence[float]) -> tuple[float | None, float | None]:
    lower = max((b for b in finite if b <= slo.threshold), default=None)
    upper = min((b for b in finite if b > slo.threshold), default=None)
    return lower, upper


def histogram_bounds(engine: str, slo: SLO, stored: Sequence[float] = ()) -> tuple[float, ...]:
    """The bucket bounds a rule for ``slo`` on ``engine`` may use: the engine release's own
    (``collector.engine_buckets``), or for an engine whose bounds are a server option, the
    ``stored`` ones the agent scraped."""
    if slo.sli is SLI.ERROR_RATE:
        return ()
    return engine_bounds(engine, slo.sli.value) or tuple(stored)


def export_notes(slo: SLO, engine: str, bounds: Sequence[float]) -> list[str]:
    """What a user must know about the rules of ``slo``: a threshold moved to a bucket bound,
    and the labels the engine's series need through relabelling."""
    notes = []
    sel = slo.selector
    if sel.pool is not None:
        notes.append(
            f"SLO {slo.name!r} selects pool={sel.pool!r}, and {engine} exports no 'pool' "
            f"label: add it to the engine's scrape job by relabelling (relabel_configs: "
            f"[{{target_label: pool, replacement: {sel.pool}}}]), or the rules match no series"
        )
    if sel.target is not None:
        notes.append(
            f"SLO {slo.name!r} selects target={sel.target!r} as instance={sel.target!r}: "
            "Prometheus sets 'instance' to host:port, so relabel the scrape job "
            f"(relabel_configs: [{{target_label: instance, replacement: {sel.target}}}])"
        )
    if slo.sli is SLI.ERROR_RATE:
        return notes
    rule = engine_rule(engine, slo.sli.value)
    lower, upper = _nearest(slo, _finite(slo, engine, bounds))
    if lower == slo.threshold:
        return notes

    def ms(b: float) -> str:
        return f"{b * 1000:g}ms"

    where = f"{ms(slo.threshold)} is not a bucket bound of {rule.source}"
    if lower is None:
        notes.append(
            f"SLO {slo.name!r}: {where} and lies below its first bound {ms(upper or 0.0)}: no "
            "request can count as good, so the rules always burn; raise the threshold"
        )
    elif slo.interpolate and upper is not None:
        notes.append(
            f"SLO {slo.name!r}: {where}; the rules interpolate between {ms(lower)} and "
            f"{ms(upper)} (interpolate: true)"
        )
    else:
        following = f", the next is {ms(upper)}" if upper is not None else ""
        notes.append(
            f"SLO {slo.name!r}: {where}; the rules count requests up to {ms(lower)} as good "
            f"(the bound below{following}): set the threshold to a bound, or interpolate: true"
        )
    return notes


def prometheus_rules(
    slos: Sequence[SLO], engine: str = "vllm", bounds: Mapping[str, Sequence[float]] | None = None
) -> dict[str, Any]:
    """The rule file (as data) for ``slos`` on ``engine``; SLOs with alerting off are left
    out.

    Args:
        slos: the SLOs.
        engine: whose metric names to use.
        bounds: bucket bounds (seconds) the agent scraped, per canonical histogram
            (``ttft`` ...); used only for an engine whose release does not fix them.

    Raises:
        ConfigError: the engine lacks a metric an SLO needs.
        SLOSpecError: an SLO has no budget.
    """
    groups = []
    for slo in slos:
        if not slo.alerting.enabled:
            continue
        budget = error_budget(slo)
        windows = burn_windows(slo)
        labels = {"slo": slo.name}
        fam_bounds = histogram_bounds(engine, slo, (bounds or {}).get(slo.sli.value, ()))
        rules: list[dict[str, Any]] = [
            {
                "record": record_name(w),
                "expr": error_ratio_expr(slo, engine, w, fam_bounds),
                "labels": dict(labels),
            }
            for w in sorted({w for c in windows for w in (c.long_s, c.short_s)})
        ]
        for severity in dict.fromkeys(c.severity for c in windows):
            pairs = [
                f'({record_name(c.long_s)}{{slo="{slo.name}"}} > {c.factor * budget:.10g} and '
                f'{record_name(c.short_s)}{{slo="{slo.name}"}} > {c.factor * budget:.10g})'
                for c in windows
                if c.severity == severity
            ]
            rules.append(
                {
                    "alert": ALERT_NAME,
                    "expr": " or ".join(pairs),
                    "labels": {**slo.alerting.labels, **labels, "severity": severity},
                    "annotations": {
                        "summary": f"SLO {slo.name} ({slo.spec}) is burning its error budget",
                    },
                }
            )
        groups.append({"name": f"slotune-slo-{slo.name}", "rules": rules})
    return {"groups": groups}


def dump_rules(data: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(data), sort_keys=False, width=10_000)


def stored_slos(
    store: Store, names: Sequence[str] = ()
) -> tuple[list[SLO], dict[str, list[float]]]:
    """The stored SLOs (all, or those named) and the bucket bounds the agent scraped per
    canonical histogram they read.

    Raises:
        ConfigError: an unknown SLO name.
    """
    slos = load_slos(store)
    unknown = [n for n in names if n not in slos]
    if unknown:
        raise ConfigError(f"no SLO named {unknown[0]!r}; see the names with `slotune slo list`")
    chosen = [slos[n] for n in names] if names else list(slos.values())
    reader = SliReader(store, time.time())
    return chosen, {s.sli.value: reader.bounds(s) for s in chosen}


def export_prometheus(store: Store, names: Sequence[str] = (), engine: str = "vllm") -> RuleExport:
    """The rule file of the stored SLOs (all, or those named), on the bucket bounds of the
    engine's release (see :func:`histogram_bounds`), with the notes a user must read.

    Raises:
        ConfigError: an unknown SLO name or engine, a metric the engine lacks, or bounds
            that are not known.
    """
    chosen, stored = stored_slos(store, names)
    notes = tuple(
        note
        for s in chosen
        if s.alerting.enabled
        for note in export_notes(s, engine, histogram_bounds(engine, s, stored[s.sli.value]))
    )
    text = dump_rules(prometheus_rules(chosen, engine, stored))
    header = "".join(f"# warning: {n}\n" for n in notes)
    return RuleExport(header + text, notes)
