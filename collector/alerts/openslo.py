"""OpenSLO v1 documents as slotune SLOs (``slotune slo apply`` reads both formats).

Supported, exactly as slotune means them:

- ``SLO`` with ``budgetingMethod: Occurrences``, a rolling ``timeWindow`` and its
  ``indicator`` inline or by ``indicatorRef``; each ``objectives[]`` entry becomes one SLO
  (``<name>`` for the first, ``<name>-<n>`` for the next ones);
- ``SLI`` with ``thresholdMetric`` or ``ratioMetric`` (``good``/``total`` or ``bad``/``total``)
  whose ``metricSource`` is ``type: slotune`` (``spec: {sli, unit, selector}``: the threshold is
  the objective's ``value`` in ``unit``, the percentile its ``target``) or ``type: prometheus``
  whose query names an engine metric slotune knows (vLLM / SGLang / TensorRT-LLM histograms,
  a bucket ``le`` as the threshold; ``request_success_total{finished_reason}`` for errors);
- ``AlertPolicy`` (inline or by ``alertPolicyRef``) with one ``AlertCondition`` of kind
  ``burnrate``: ``threshold`` is the burn-rate factor, ``lookbackWindow`` the long window, and
  the short window is a twelfth of it (the SRE workbook's 1h / 5m);
- ``Service``, ``DataSource`` and ``AlertNotificationTarget`` are read and carry nothing
  slotune uses (notifications are routed by ``slotune alerts run --notify``).

Anything else (``Timeslices``, calendar windows, ``raw`` ratios, ``alertAfter``,
``alertWhenNoData``, other metric sources) is refused naming the document, the field and why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeGuard

from slotune.collector.alerts.foreign_slo import (
    NO_ENGINE_METRIC,
    engine_metric,
    engine_selector,
    error_slo,
    latency_slo,
)
from slotune.collector.durations import parse_duration_s
from slotune.collector.errors import SLOSpecError
from slotune.collector.slo import (
    SLI,
    SLO,
    Alerting,
    BurnWindow,
    Selector,
)
from slotune.collector.yamlfile import read_yaml_documents

API_VERSION = "openslo/v1"
KINDS = (
    "SLO",
    "SLI",
    "AlertPolicy",
    "AlertCondition",
    "AlertNotificationTarget",
    "Service",
    "DataSource",
)
_UNITS = {"ms": 1e-3, "s": 1.0}
# OpenSLO's duration shorthand adds months, quarters and years (as 30, 90 and 365 days).
_LONG_UNITS = {"M": 30 * 86400.0, "Q": 90 * 86400.0, "Y": 365 * 86400.0}
SHORT_WINDOW_RATIO = 12.0

Fail = Callable[[tuple[Any, ...], str], SLOSpecError]


def _field(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, Mapping) else {}


def _mapping(value: Any, path: tuple[Any, ...], fail: Fail) -> Mapping[str, Any]:
    """``value`` as a mapping (None: empty); anything else is refused at ``path``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(path, "must be a mapping")
    return value


def is_openslo(text: str) -> bool:
    """Whether a YAML text holds OpenSLO documents."""
    return re.search(r"^apiVersion:\s*['\"]?openslo/", text, re.MULTILINE) is not None


def parse_openslo(text: str, *, source: str = "<string>") -> list[SLO]:
    """The SLOs of an OpenSLO v1 file (all documents are checked first).

    Raises:
        SLOSpecError: naming ``source:line``, the document, the field and why.
    """
    docs = read_yaml_documents(text, source=source, error=SLOSpecError)
    by_kind: dict[str, dict[str, tuple[Mapping[str, Any], Fail]]] = {k: {} for k in KINDS}
    for index, (doc, lines) in enumerate(docs, start=1):
        fail = _failer(source, index, doc, lines)
        if not isinstance(doc, Mapping):
            raise fail((), "each document must be a mapping with apiVersion, kind, metadata, spec")
        if doc.get("apiVersion") != API_VERSION:
            raise fail(("apiVersion",), f"must be {API_VERSION} (the version slotune reads)")
        kind = doc.get("kind")
        if kind not in KINDS:
            raise fail(("kind",), f"kind {kind!r} is not an OpenSLO v1 kind ({', '.join(KINDS)})")
        name = _field(doc, "metadata").get("name")
        if not isinstance(name, str) or not name:
            raise fail(("metadata", "name"), "is required")
        by_kind[kind][name] = (doc, fail)
    # Alerting documents are checked even when no SLO uses them.
    for doc, fail in by_kind["AlertCondition"].values():
        _condition(doc, (), fail)
    for doc, fail in by_kind["AlertPolicy"].values():
        _policy(doc, (), fail, by_kind)
    out: list[SLO] = []
    for doc, fail in by_kind["SLO"].values():
        out.extend(_slo(doc, fail, by_kind))
    if not out:
        raise SLOSpecError(f"{source}: no OpenSLO document of kind SLO; nothing to apply")
    return out


def _failer(source: str, index: int, doc: Any, lines: Mapping[tuple[Any, ...], int]) -> Fail:
    kind = doc.get("kind", "?") if isinstance(doc, Mapping) else "?"
    name = _field(doc, "metadata").get("name", "?") if isinstance(doc, Mapping) else "?"

    def fail(path: tuple[Any, ...], why: str) -> SLOSpecError:
        line = next((lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in lines), 1)
        field = ".".join(str(p) for p in path) or "document"
        return SLOSpecError(f"{source}:{line}: document {index} ({kind} {name!r}): {field}: {why}")

    return fail


def _slo(
    doc: Mapping[str, Any], fail: Fail, by_kind: Mapping[str, Mapping[str, tuple[Any, Fail]]]
) -> list[SLO]:
    spec = _mapping(doc.get("spec"), ("spec",), fail)
    name = doc["metadata"]["name"]
    method = spec.get("budgetingMethod")
    if method is None:
        raise fail(("spec", "budgetingMethod"), "is required; slotune supports Occurrences")
    if method != "Occurrences":
        raise fail(
            ("spec", "budgetingMethod"),
            f"{method!r} is not supported: slotune counts good requests over the window "
            "(Occurrences); time slices have no equivalent in its SLIs",
        )
    window_s = _window(spec.get("timeWindow"), fail)
    indicator, ind_fail, ind_path = _indicator(spec, fail, by_kind)
    objectives = spec.get("objectives")
    if not isinstance(objectives, list) or not objectives:
        raise fail(("spec", "objectives"), "at least one objective is required")
    alerting = _alerting(spec.get("alertPolicies"), fail, by_kind)
    out = []
    for i, objective in enumerate(objectives):
        slo_name = name if i == 0 else f"{name}-{i + 1}"
        slo = _objective_slo(
            slo_name,
            objective,
            ("spec", "objectives", i),
            fail,
            indicator,
            ind_fail,
            ind_path,
            window_s,
        )
        out.append(replace(slo, description=str(spec.get("description", "")), alerting=alerting))
    return out


def _window(value: Any, fail: Fail) -> float:
    path = ("spec", "timeWindow")
    if value is None:
        return 30 * 86400.0
    if not isinstance(value, list) or len(value) != 1 or not isinstance(value[0], Mapping):
        raise fail(path, "must hold exactly one time window")
    window = value[0]
    if "calendar" in window or window.get("isRolling") is False:
        raise fail(
            (*path, 0, "isRolling"),
            "calendar-aligned windows are not supported: slotune's SLO windows roll; "
            "use isRolling: true",
        )
    return _duration(window.get("duration"), (*path, 0, "duration"), fail)


def _duration(value: Any, path: tuple[Any, ...], fail: Fail) -> float:
    text = str(value)
    m = re.fullmatch(r"(\d+)([MQY])", text)
    if m:
        return int(m[1]) * _LONG_UNITS[m[2]]
    try:
        return parse_duration_s(text, field_name=path[-1])
    except SLOSpecError as e:
        raise fail(path, str(e)) from e


def _ref(
    by_kind: Mapping[str, Mapping[str, tuple[Any, Fail]]],
    kind: str,
    name: Any,
    path: tuple[Any, ...],
    fail: Fail,
) -> tuple[Mapping[str, Any], Fail]:
    found = by_kind[kind].get(name) if isinstance(name, str) else None
    if found is None:
        raise fail(path, f"refers to {kind} {name!r}, which is not in the file")
    return found


def _indicator(
    spec: Mapping[str, Any], fail: Fail, by_kind: Mapping[str, Mapping[str, tuple[Any, Fail]]]
) -> tuple[Mapping[str, Any], Fail, tuple[Any, ...]]:
    if "indicator" in spec:
        return _mapping(spec["indicator"], ("spec", "indicator"), fail), fail, ("spec", "indicator")
    if "indicatorRef" in spec:
        doc, ref_fail = _ref(by_kind, "SLI", spec["indicatorRef"], ("spec", "indicatorRef"), fail)
        return doc, ref_fail, ()
    raise fail(("spec",), "give indicator or indicatorRef")


def _objective_slo(
    name: str,
    objective: Any,
    path: tuple[Any, ...],
    fail: Fail,
    indicator: Mapping[str, Any],
    ind_fail: Fail,
    ind_path: tuple[Any, ...],
    window_s: float,
) -> SLO:
    if not isinstance(objective, Mapping):
        raise fail(path, "each objective must be a mapping")
    if "target" in objective:
        target = objective["target"]
    elif "targetPercent" in objective:
        target = float(objective["targetPercent"]) / 100.0
    else:
        raise fail(path, "give target (e.g. 0.99) or targetPercent (e.g. 99)")
    if not isinstance(target, int | float) or not 0 < float(target) < 1:
        raise fail((*path, "target"), f"{target!r} must be in (0, 1)")
    if "timeSliceTarget" in objective or "timeSliceWindow" in objective:
        raise fail((*path, "timeSliceTarget"), "time slices are not supported (Occurrences only)")
    ipath = (*ind_path, "spec")
    spec = _mapping(indicator.get("spec"), ipath, ind_fail)
    if "thresholdMetric" in spec:
        sli, unit, selector = _source(
            spec["thresholdMetric"], (*ipath, "thresholdMetric"), ind_fail
        )
        if sli is SLI.ERROR_RATE:
            return error_slo(name, float(target), window_s, selector)
        return _latency(name, sli, objective, path, fail, float(target), unit, window_s, selector)
    if "ratioMetric" in spec:
        return _ratio(
            name, spec["ratioMetric"], (*ipath, "ratioMetric"), ind_fail, float(target), window_s
        )
    raise ind_fail(ipath, "give thresholdMetric or ratioMetric")


def _latency(
    name: str,
    sli: SLI,
    objective: Mapping[str, Any],
    path: tuple[Any, ...],
    fail: Fail,
    target: float,
    unit: float,
    window_s: float,
    selector: Selector,
) -> SLO:
    op = objective.get("op")
    if op not in ("lt", "lte"):
        raise fail(
            (*path, "op"),
            f"{op!r} is not supported for a latency SLI: a request is good when its value is "
            "within the threshold, so use lte (or lt)",
        )
    value = objective.get("value")
    if not _positive(value):
        raise fail((*path, "value"), "the threshold must be a positive number")
    return latency_slo(name, sli, float(value) * unit, target, window_s, selector)


def _metric_source(metric: Any, path: tuple[Any, ...], fail: Fail) -> tuple[str, Mapping[str, Any]]:
    source = (metric or {}).get("metricSource") if isinstance(metric, Mapping) else None
    if not isinstance(source, Mapping):
        raise fail(path, "needs a metricSource")
    type_ = str(source.get("type", "")).lower()
    if type_ not in ("slotune", "prometheus"):
        raise fail(
            (*path, "metricSource", "type"),
            f"metric source {source.get('type')!r} is not supported: use slotune "
            "(spec: {sli: ttft, unit: ms}) or prometheus with an engine metric slotune knows",
        )
    return type_, _mapping(source.get("spec"), (*path, "metricSource", "spec"), fail)


def _source(metric: Any, path: tuple[Any, ...], fail: Fail) -> tuple[SLI, float, Selector]:
    """(SLI, unit in seconds, selector) of a thresholdMetric."""
    type_, spec = _metric_source(metric, path, fail)
    spath = (*path, "metricSource", "spec")
    if type_ == "slotune":
        try:
            sli = SLI(str(spec.get("sli")))
        except ValueError as e:
            raise fail((*spath, "sli"), "must be one of ttft, itl, tpot, e2e, error_rate") from e
        unit = spec.get("unit", "ms")
        if unit not in _UNITS:
            raise fail((*spath, "unit"), f"{unit!r} must be ms or s")
        sel = spec.get("selector") or {}
        if not isinstance(sel, Mapping) or set(sel) - {"model", "pool", "target"}:
            raise fail((*spath, "selector"), "must be a mapping of model / pool / target")
        return sli, _UNITS[unit], Selector(**{k: str(v) for k, v in sel.items()})
    canonical, matchers = _prometheus(spec, spath, fail)
    if canonical == "requests_finished":
        return SLI.ERROR_RATE, 1.0, engine_selector(matchers)
    return SLI(canonical), 1.0, engine_selector(matchers)  # engine histograms are in seconds


def _prometheus(
    spec: Mapping[str, Any], path: tuple[Any, ...], fail: Fail
) -> tuple[str, dict[str, str]]:
    found = engine_metric(str(spec.get("query", "")))
    if found is None:
        raise fail((*path, "query"), f"names {NO_ENGINE_METRIC}")
    return found


def _ratio(
    name: str, ratio: Any, path: tuple[Any, ...], fail: Fail, target: float, window_s: float
) -> SLO:
    if not isinstance(ratio, Mapping):
        raise fail(path, "must be a mapping")
    if "raw" in ratio:
        raise fail(
            (*path, "raw"),
            "precomputed ratios are not supported: give good (or bad) and total queries",
        )
    side = "good" if "good" in ratio else "bad" if "bad" in ratio else None
    if side is None or "total" not in ratio:
        raise fail(path, "give good (or bad) and total")
    type_, spec = _metric_source(ratio[side], (*path, side), fail)
    spath = (*path, side, "metricSource", "spec")
    if type_ == "slotune":
        sli, unit, selector = _source(ratio[side], (*path, side), fail)
        if sli is SLI.ERROR_RATE:
            return error_slo(name, target, window_s, selector)
        threshold = spec.get("threshold")
        if not _positive(threshold):
            raise fail((*spath, "threshold"), "a latency ratio needs the threshold (in unit)")
        return latency_slo(name, sli, float(threshold) * unit, target, window_s, selector)
    canonical, matchers = _prometheus(spec, spath, fail)
    selector = engine_selector(matchers)
    if canonical == "requests_finished":
        return error_slo(name, target, window_s, selector)
    le = matchers.get("le")
    if side == "bad" or le is None or le == "+Inf":
        raise fail(
            (*spath, "query"),
            "a latency ratio from a histogram needs good = its bucket at the threshold "
            '(e.g. vllm:time_to_first_token_seconds_bucket{le="0.5"}) and total = its count',
        )
    return latency_slo(name, SLI(canonical), float(le), target, window_s, selector)


def _alerting(
    policies: Any, fail: Fail, by_kind: Mapping[str, Mapping[str, tuple[Any, Fail]]]
) -> Alerting:
    if not policies:
        return Alerting()
    if not isinstance(policies, list):
        raise fail(("spec", "alertPolicies"), "must be a list")
    windows = []
    for i, item in enumerate(policies):
        path = ("spec", "alertPolicies", i)
        if isinstance(item, Mapping) and "alertPolicyRef" in item:
            doc, pfail = _ref(by_kind, "AlertPolicy", item["alertPolicyRef"], path, fail)
            windows.append(_policy(doc, (), pfail, by_kind))
        elif isinstance(item, Mapping):
            windows.append(_policy(item, path, fail, by_kind))
        else:
            raise fail(path, "give alertPolicyRef or an inline AlertPolicy")
    return Alerting(windows=tuple(windows))


def _policy(
    doc: Mapping[str, Any],
    path: tuple[Any, ...],
    fail: Fail,
    by_kind: Mapping[str, Mapping[str, tuple[Any, Fail]]],
) -> BurnWindow:
    spath = (*path, "spec")
    spec = _mapping(doc.get("spec"), spath, fail)
    if spec.get("alertWhenNoData"):
        raise fail((*spath, "alertWhenNoData"), "no-data alerts are not supported; set it to false")
    if spec.get("alertWhenBreaching") is False:
        raise fail(
            (*spath, "alertWhenBreaching"), "slotune alerts when the budget burns; set it to true"
        )
    conditions = spec.get("conditions")
    if not isinstance(conditions, list) or len(conditions) != 1:
        raise fail((*spath, "conditions"), "exactly one condition is required (OpenSLO v1)")
    cond = conditions[0]
    cpath = (*spath, "conditions", 0)
    if isinstance(cond, Mapping) and "conditionRef" in cond:
        cond_doc, cfail = _ref(by_kind, "AlertCondition", cond["conditionRef"], cpath, fail)
        return _condition(cond_doc, (), cfail)
    return _condition(cond, cpath, fail)


def _condition(doc: Any, path: tuple[Any, ...], fail: Fail) -> BurnWindow:
    spec = _mapping(_mapping(doc, path, fail).get("spec"), (*path, "spec"), fail)
    cpath = (*path, "spec", "condition")
    cond = _mapping(spec.get("condition"), cpath, fail)
    if cond.get("kind", "burnrate") != "burnrate":
        raise fail((*cpath, "kind"), f"{cond.get('kind')!r} is not supported; use burnrate")
    if _duration(cond.get("alertAfter", "0m"), (*cpath, "alertAfter"), fail) > 0:
        raise fail(
            (*cpath, "alertAfter"),
            "is not supported: slotune's burn-rate alerts need no waiting time (a short window "
            "of a twelfth of lookbackWindow must burn too); set 0m or leave it out",
        )
    factor = cond.get("threshold")
    if not _positive(factor):
        raise fail((*cpath, "threshold"), "the burn-rate factor must be a positive number")
    if cond.get("op", "gte") not in ("gt", "gte"):
        raise fail((*cpath, "op"), "a burn-rate alert fires above the factor: use gte or gt")
    long_s = _duration(cond.get("lookbackWindow"), (*cpath, "lookbackWindow"), fail)
    severity = spec.get("severity")
    if not isinstance(severity, str) or not severity:
        raise fail((*path, "spec", "severity"), "is required (e.g. page)")
    return BurnWindow(severity, long_s, long_s / SHORT_WINDOW_RATIO, float(factor))


def _positive(value: Any) -> TypeGuard[float]:
    """A finite number above zero (YAML's .inf and .nan are not)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
