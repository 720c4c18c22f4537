"""The SLO YAML file: a list of SLOs, each a shorthand or its fields, with window, objective,
selector and alerting."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from slotune.collector import textfile
from slotune.collector.durations import parse_duration_s
from slotune.collector.errors import SLOSpecError
from slotune.collector.slo._model import NAME_RE, SLI, SLO, Alerting, BurnWindow, Selector
from slotune.collector.slo._shorthand import SHORTHAND_FORMS, parse_slo
from slotune.collector.yamlfile import read_yaml

# One line, as every error is: the whole form, with each optional field, is examples/slos.yaml.
_FILE_FORM = (
    "accepted form: slos: [{name: chat-ttft, spec: 'ttft:p99<=500ms'}], optional fields "
    "window, objective, selector, interpolate, alerting (see examples/slos.yaml)"
)

_ALLOWED_KEYS = {
    "name",
    "spec",
    "sli",
    "percentile",
    "threshold",
    "objective",
    "window",
    "selector",
    "description",
    "interpolate",
    "alerting",
}
_ALERTING_KEYS = {"enabled", "windows", "labels"}
_WINDOW_KEYS = {"severity", "long", "short", "factor"}
_SELECTOR_KEYS = {"model", "pool", "target"}

_Path = tuple[Any, ...]
_Fail = Callable[[_Path, str], SLOSpecError]


def load_slo_file(path: str | Path) -> list[SLO]:
    """Read an SLO YAML file.

    Raises:
        SLOSpecError: naming the file, line and field, with the accepted form.
    """
    return parse_slo_yaml(textfile.read_text(path, "SLO file", SLOSpecError), source=str(path))


def parse_slo_yaml(text: str, *, source: str = "<string>") -> list[SLO]:
    """Parse the text of an SLO YAML file (see :func:`load_slo_file`)."""
    data, lines = read_yaml(text, source=source, error=SLOSpecError)
    if data is None:
        raise SLOSpecError(f"{source}: the file is empty; {_FILE_FORM}")

    def fail(path: _Path, msg: str) -> SLOSpecError:
        line = lines.get(path, lines.get(path[:-1], 1))
        return SLOSpecError(f"{source}:{line}: {msg}")

    items = data.get("slos") if isinstance(data, Mapping) else data
    base: _Path = ("slos",) if isinstance(data, Mapping) else ()
    if not isinstance(items, list):
        raise fail(base, f"expected a list under 'slos'; {_FILE_FORM}")
    slos = [_parse_item(item, (*base, i), fail) for i, item in enumerate(items)]
    names: dict[str, int] = {}
    for i, s in enumerate(slos):
        if s.name in names:
            raise fail(
                (*base, i, "name"),
                f"field 'name': {s.name!r} is used twice; give each SLO a unique name",
            )
        names[s.name] = i
    return slos


def _parse_item(item: Any, path: _Path, fail: _Fail) -> SLO:
    if not isinstance(item, Mapping):
        raise fail(path, f"each SLO must be a mapping; {_FILE_FORM}")
    unknown = set(item) - _ALLOWED_KEYS
    if unknown:
        key = sorted(unknown)[0]
        allowed = ", ".join(sorted(_ALLOWED_KEYS))
        raise fail((*path, key), f"unknown field {key!r}; allowed: {allowed}")
    name = item.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise fail(
            (*path, "name"),
            "field 'name' is required: lowercase letters, digits and '-_.' (e.g. chat-ttft)",
        )
    try:
        window_s = parse_duration_s(item.get("window", "30d"), field_name="field 'window'")
    except SLOSpecError as e:
        raise fail((*path, "window"), str(e)) from e
    selector = _parse_selector(item.get("selector"), (*path, "selector"), fail)
    spec = item.get("spec")
    if spec is None:
        spec = _spec_from_fields(item, path, fail)
    elif not isinstance(spec, str):
        raise fail((*path, "spec"), f"field 'spec' must be a string like {SHORTHAND_FORMS}")
    try:
        slo = parse_slo(spec, name=name, window_s=window_s, selector=selector)
    except SLOSpecError as e:
        raise fail((*path, "spec"), f"field 'spec': {e}") from e
    if "objective" in item:
        slo = replace(slo, objective=_parse_fraction(item["objective"], (*path, "objective"), fail))
    if item.get("description"):
        slo = replace(slo, description=str(item["description"]))
    if "interpolate" in item:
        if not isinstance(item["interpolate"], bool):
            raise fail((*path, "interpolate"), "field 'interpolate' must be true or false")
        slo = replace(slo, interpolate=item["interpolate"])
    if "alerting" in item:
        slo = replace(slo, alerting=_parse_alerting(item["alerting"], (*path, "alerting"), fail))
    return slo


def _parse_alerting(value: Any, path: _Path, fail: _Fail) -> Alerting:
    if not isinstance(value, Mapping):
        raise fail(path, "field 'alerting' must be a mapping of enabled / windows / labels")
    unknown = set(value) - _ALERTING_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise fail(
            (*path, key), f"alerting field {key!r} is unknown; allowed: enabled, windows, labels"
        )
    enabled = value.get("enabled", True)
    if not isinstance(enabled, bool):
        raise fail((*path, "enabled"), "field 'alerting.enabled' must be true or false")
    labels = value.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise fail((*path, "labels"), "field 'alerting.labels' must be a mapping of strings")
    windows = value.get("windows") or []
    if not isinstance(windows, list):
        raise fail((*path, "windows"), "field 'alerting.windows' must be a list")
    return Alerting(
        enabled=enabled,
        windows=tuple(_parse_window(w, (*path, "windows", i), fail) for i, w in enumerate(windows)),
        labels={str(k): str(v) for k, v in labels.items()},
    )


def _parse_window(value: Any, path: _Path, fail: _Fail) -> BurnWindow:
    form = "{severity: page, long: 1h, short: 5m, factor: 14.4}"
    if not isinstance(value, Mapping) or set(value) != _WINDOW_KEYS:
        raise fail(
            path, f"each alerting window needs exactly severity, long, short, factor: {form}"
        )
    try:
        long_s = parse_duration_s(value["long"], field_name="field 'long'")
        short_s = parse_duration_s(value["short"], field_name="field 'short'")
    except SLOSpecError as e:
        raise fail(path, str(e)) from e
    factor = value["factor"]
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor < math.inf:
        raise fail((*path, "factor"), f"field 'factor' must be a positive number: {form}")
    if not 0 < short_s < long_s:
        raise fail((*path, "short"), f"the short window must be shorter than the long one: {form}")
    return BurnWindow(str(value["severity"]), long_s, short_s, float(factor))


def _spec_from_fields(item: Mapping[str, Any], path: _Path, fail: _Fail) -> str:
    sli = item.get("sli")
    if not isinstance(sli, str) or sli not in {s.value for s in SLI}:
        raise fail(
            (*path, "sli"),
            "give either 'spec' (e.g. ttft:p99<=500ms) or 'sli' "
            "(ttft, itl, tpot, e2e, error_rate) with 'threshold'",
        )
    threshold = item.get("threshold")
    if threshold is None:
        raise fail(
            (*path, "threshold"), "field 'threshold' is required (e.g. 500ms, or 1% for error_rate)"
        )
    if sli == SLI.ERROR_RATE.value:
        return f"error_rate<={threshold}"
    pct = item.get("percentile")
    if pct is None:
        raise fail(
            (*path, "percentile"), "field 'percentile' is required for latency SLIs (e.g. 99)"
        )
    thr = str(threshold)
    if re.fullmatch(r"\d+(\.\d+)?", thr):
        raise fail((*path, "threshold"), f"field 'threshold': {thr!r} needs a unit, e.g. {thr}ms")
    return f"{sli}:p{str(pct).lstrip('pP')}<={thr}"


def _parse_fraction(value: Any, path: _Path, fail: _Fail) -> float:
    text = str(value).strip()
    try:
        frac = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        frac = -1.0
    if frac > 1 and not text.endswith("%"):  # 99.5 means 99.5 %; 150% is an error
        frac /= 100.0
    if not 0 < frac <= 1:
        raise fail(path, f"field 'objective': {value!r} must be a fraction like 0.995 or 99.5%")
    return frac


def _parse_selector(value: Any, path: _Path, fail: _Fail) -> Selector:
    if value is None:
        return Selector()
    if not isinstance(value, Mapping):
        raise fail(path, "field 'selector' must be a mapping of model / pool / target")
    unknown = set(value) - _SELECTOR_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise fail((*path, key), f"selector field {key!r} is unknown; allowed: model, pool, target")
    return Selector(**{k: str(v) for k, v in value.items()})
