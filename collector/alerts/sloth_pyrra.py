"""Sloth and Pyrra SLO files as slotune SLOs (``slotune slo apply`` reads both).

Both describe an SLO as PromQL over the service's own metrics; slotune evaluates its SLOs on
measured requests. What maps is imported: an SLI whose query names an engine metric slotune
knows (as for OpenSLO: a vLLM / SGLang / TensorRT-LLM latency histogram, its bucket ``le`` as
the threshold; ``request_success_total`` for errors), the objective, the window, the
description, and whether alerts are on. Anything else is refused in one line naming the file,
the line, the SLO, the field and why, with the slotune SLO that would say the same thing.

- Sloth (``version: prometheus/v1``, or the ``sloth.slok.dev/v1`` ``PrometheusServiceLevel``
  resource): each ``slos[]`` entry becomes the SLO ``<service>-<name>`` (Sloth's own SLO id),
  its ``objective`` a percentage, over Sloth's default 30 days. ``sli.events.error_query`` is
  the SLI; ``sli.raw`` and ``sli.plugin`` are refused. ``labels`` (of the file, the SLO and
  its ``alerting``) label its alerts; ``page_alert`` / ``ticket_alert`` ``disable`` drop
  those severities from the SRE workbook windows (the same ones Sloth uses). Alert names,
  annotations, per-severity labels and ``slo_plugins`` have no slotune equivalent and are
  not used.
- Pyrra (``pyrra.dev/v1alpha1`` ``ServiceLevelObjective``): ``metadata.name``, ``spec.target``
  (a percentage), ``spec.window``; ``indicator.ratio`` (``errors`` / ``total``) and
  ``indicator.latency`` (``success`` / ``total``) are read, ``bool_gauge`` and
  ``latencyNative`` refused; ``alerting.disabled`` turns alerts off.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from slotune.collector.alerts.foreign_slo import (
    NO_ENGINE_METRIC,
    engine_metric,
    engine_selector,
    error_slo,
    latency_slo,
)
from slotune.collector.alerts.policy import SRE_WORKBOOK
from slotune.collector.durations import parse_duration_s
from slotune.collector.errors import SLOSpecError
from slotune.collector.slo import NAME_RE, SLI, SLO, Alerting, check_unique

Documents = list[tuple[Any, dict[tuple[Any, ...], int]]]
Fail = Callable[[tuple[Any, ...], str], SLOSpecError]
SLOTH_DEFAULT_WINDOW_S = 30 * 86400.0
_LE_RE = re.compile(r'\ble\s*=\s*"([^"]*)"')


def foreign_format(docs: Documents) -> str | None:
    """``"sloth"`` or ``"pyrra"`` when the first YAML document is one of theirs, else None."""
    first = docs[0][0] if docs else None
    if not isinstance(first, Mapping):
        return None
    api = str(first.get("apiVersion", ""))
    if api.startswith("pyrra.dev/"):
        return "pyrra"
    if api.startswith("sloth.slok.dev/") or str(first.get("version", "")).startswith("prometheus/"):
        return "sloth"
    return None


def parse_sloth(docs: Documents, *, source: str) -> list[SLO]:
    """The SLOs of a Sloth file (every document).

    Raises:
        SLOSpecError: ``source:line``, the SLO, the field and why.
    """
    out: list[SLO] = []
    for doc, lines in docs:
        crd = isinstance(doc, Mapping) and doc.get("kind") == "PrometheusServiceLevel"
        base: tuple[Any, ...] = ("spec",) if crd else ()
        spec = _mapping(doc.get("spec") if crd else doc, base, _failer(source, lines, "Sloth"))
        service = str(spec.get("service") or "")
        slos = spec.get("slos")
        if not isinstance(slos, list) or not slos:
            raise _failer(source, lines, "Sloth")((*base, "slos"), "must be a list of SLOs")
        for i, item in enumerate(slos):
            path = (*base, "slos", i)
            item = _mapping(item, path, _failer(source, lines, "Sloth"))
            name = "-".join(p for p in (service, str(item.get("name") or "")) if p)
            fail = _failer(source, lines, f"Sloth SLO {name!r}")
            _check_name(name, (*path, "name"), fail)
            target = _percent(item.get("objective"), (*path, "objective"), fail)
            slo = _sloth_sli(name, item.get("sli"), (*path, "sli"), fail, target)
            labels = {
                **_labels(spec.get("labels")),
                **_labels(item.get("labels")),
                **_labels(_mapping(item.get("alerting"), (*path, "alerting"), fail).get("labels")),
            }
            alerting = _sloth_alerting(item.get("alerting"), (*path, "alerting"), fail)
            out.append(
                replace(
                    slo,
                    description=str(item.get("description") or ""),
                    alerting=replace(alerting, labels=labels),
                )
            )
    check_unique(out, where=source)
    return out


def parse_pyrra(docs: Documents, *, source: str) -> list[SLO]:
    """The SLOs of a file of Pyrra ``ServiceLevelObjective`` documents.

    Raises:
        SLOSpecError: ``source:line``, the SLO, the field and why.
    """
    out: list[SLO] = []
    for doc, lines in docs:
        doc = _mapping(doc, (), _failer(source, lines, "Pyrra"))
        name = str(
            _mapping(doc.get("metadata"), ("metadata",), _failer(source, lines, "Pyrra")).get(
                "name"
            )
            or ""
        )
        fail = _failer(source, lines, f"Pyrra SLO {name!r}")
        _check_name(name, ("metadata", "name"), fail)
        if doc.get("kind") != "ServiceLevelObjective":
            raise fail(("kind",), f"{doc.get('kind')!r} is not a Pyrra ServiceLevelObjective")
        spec = _mapping(doc.get("spec"), ("spec",), fail)
        target = _percent(spec.get("target"), ("spec", "target"), fail)
        try:
            window_s = parse_duration_s(str(spec.get("window")), field_name="window")
        except SLOSpecError as e:
            raise fail(("spec", "window"), str(e)) from e
        slo = _pyrra_indicator(name, spec.get("indicator"), fail, target, window_s)
        alerting = _mapping(spec.get("alerting"), ("spec", "alerting"), fail)
        out.append(
            replace(
                slo,
                description=str(spec.get("description") or ""),
                alerting=Alerting(enabled=alerting.get("disabled") is not True),
            )
        )
    check_unique(out, where=source)
    return out


def _sloth_sli(name: str, sli: Any, path: tuple[Any, ...], fail: Fail, target: float) -> SLO:
    sli = _mapping(sli, path, fail)
    if "raw" in sli:
        raise fail(
            (*path, "raw"),
            "a precomputed error ratio is not supported: slotune needs the metric it counts; "
            "give sli.events with an engine metric",
        )
    if "plugin" in sli:
        raise fail((*path, "plugin"), "Sloth SLI plugins are not supported; give sli.events")
    events = _mapping(sli.get("events"), (*path, "events"), fail)
    query = events.get("error_query")
    if not isinstance(query, str):
        raise fail((*path, "events", "error_query"), "is required (a PromQL query)")
    return _from_query(name, query, (*path, "events", "error_query"), fail, target, None)


def _sloth_alerting(value: Any, path: tuple[Any, ...], fail: Fail) -> Alerting:
    alerting = _mapping(value, path, fail)
    off = {
        severity
        for severity, key in (("page", "page_alert"), ("ticket", "ticket_alert"))
        if _mapping(alerting.get(key), (*path, key), fail).get("disable") is True
    }
    if not off:
        return Alerting()
    windows = tuple(w for w in SRE_WORKBOOK if w.severity not in off)
    return Alerting(enabled=bool(windows), windows=windows)


def _pyrra_indicator(name: str, value: Any, fail: Fail, target: float, window_s: float) -> SLO:
    path = ("spec", "indicator")
    indicator = _mapping(value, path, fail)
    for kind, side in (("ratio", "errors"), ("latency", "success")):
        if kind in indicator:
            spath = (*path, kind, side, "metric")
            metric = _mapping(indicator[kind], (*path, kind), fail).get(side)
            query = metric.get("metric") if isinstance(metric, Mapping) else None
            if not isinstance(query, str):
                raise fail(spath, "is required (a Prometheus metric selector)")
            return _from_query(name, query, spath, fail, target, window_s)
    kinds = ", ".join(map(str, indicator)) or "none"
    raise fail(path, f"{kinds}: slotune reads the ratio and latency indicators only")


def _from_query(
    name: str,
    query: str,
    path: tuple[Any, ...],
    fail: Fail,
    target: float,
    window_s: float | None,
) -> SLO:
    window = SLOTH_DEFAULT_WINDOW_S if window_s is None else window_s
    found = engine_metric(query)
    if found is None:
        le = _LE_RE.search(query)
        same = (
            f"e2e:p{target * 100:.10g}<={float(le[1]) * 1000:.10g}ms"
            if le and _is_number(le[1])
            else f"error_rate<={(1 - target) * 100:.10g}%"
        )
        raise fail(
            path,
            f"{query[:80]!r} names {NO_ENGINE_METRIC}. slotune's SLOs are over served "
            f"requests (ttft, itl, tpot, e2e, error_rate): for requests to an engine, write "
            f"e.g. spec: {same} in a slotune SLO file (examples/slos.yaml)",
        )
    canonical, matchers = found
    selector = engine_selector(matchers)
    if canonical == "requests_finished":
        return error_slo(name, target, window, selector)
    try:
        threshold_s = float(matchers.get("le", "nan"))
    except ValueError:
        threshold_s = math.nan
    if not 0 < threshold_s < math.inf:
        raise fail(
            path,
            "a latency SLI from a histogram needs its bucket at the threshold "
            '(e.g. vllm:time_to_first_token_seconds_bucket{le="0.5"})',
        )
    return latency_slo(name, SLI(canonical), threshold_s, target, window, selector)


def _is_number(text: str) -> bool:
    try:
        return 0 < float(text) < math.inf
    except ValueError:
        return False


def _check_name(name: str, path: tuple[Any, ...], fail: Fail) -> None:
    if not NAME_RE.match(name):
        raise fail(path, f"{name!r} is not a slotune SLO name: lowercase letters, digits and '-_.'")


def _percent(value: Any, path: tuple[Any, ...], fail: Fail) -> float:
    """A percentage objective (99.9, or Pyrra's string "99.9") as a fraction."""
    try:
        percent = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        percent = math.nan
    if not 0 < percent < 100:
        raise fail(path, f"{value!r} must be a percentage between 0 and 100 (e.g. 99.9)")
    return percent / 100.0


def _labels(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _mapping(value: Any, path: tuple[Any, ...], fail: Fail) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(path, "must be a mapping")
    return value


def _failer(source: str, lines: Mapping[tuple[Any, ...], int], what: str) -> Fail:
    def fail(path: tuple[Any, ...], why: str) -> SLOSpecError:
        line = next((lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in lines), 1)
        field = ".".join(str(p) for p in path) or "document"
        return SLOSpecError(f"{source}:{line}: {what}: {field}: {why}")

    return fail
