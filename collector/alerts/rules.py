"""Threshold rules on metrics: ``kv_usage > 0.9 for 5m`` with hysteresis, severity, labels.

Shorthand: ``METRIC OP VALUE[%] [for DURATION]``, OP one of ``> >= < <= == !=``. A YAML file::

    rules:
      - name: kv-full                       # unique: lowercase letters, digits, - _ .
        expr: kv_usage > 0.9 for 5m         # the shorthand ...
        resolve: 0.8                        # optional: resolved only once back past 0.8
        severity: warning                   # optional, default warning
        labels: {team: serving}             # optional, added to the notifications
        selector: {pool: chat}              # optional: which targets
      - name: engine-down                   # ... or the same with fields
        metric: up
        op: "=="
        threshold: 0
        for: 1m

Without ``resolve`` an alert resolves as soon as the condition no longer holds.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slotune.collector.alerts.metrics import metric_def
from slotune.collector.durations import parse_duration_s
from slotune.collector.errors import ConfigError
from slotune.collector.slo import Selector
from slotune.collector.store import AlertRuleInfo, Store, delete_alert_rules, list_alert_rules
from slotune.collector.textfile import read_text
from slotune.collector.yamlfile import read_yaml

# Possessive whitespace (``\s*+``): with plain ``\s*`` on both sides of the optional parts, a
# run of spaces before a word that does not fit backtracks in cubic time (3,000 spaces: minutes).
_SHORTHAND = re.compile(
    r"^\s*+(?P<metric>[A-Za-z_:][\w:]*)\s*+(?P<op>>=|<=|==|!=|>|<)\s*+"
    r"(?P<value>-?\d+(?:\.\d+)?(?:[eE]-?\d+)?)\s*+(?P<pct>%?)\s*+(?:for\s++(?P<for>\S+))?\s*+$"
)
SHORTHAND_FORM = "METRIC OP VALUE [for DURATION], e.g. 'kv_usage > 0.9 for 5m' or 'up == 0'"
OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,127}$")
_KEYS = {
    "name",
    "expr",
    "metric",
    "op",
    "threshold",
    "for",
    "resolve",
    "severity",
    "labels",
    "selector",
}
THRESHOLD_KIND = "threshold"


@dataclass(frozen=True, slots=True)
class ThresholdRule:
    """Fire when ``metric OP threshold`` has held for ``for_s`` on a target.

    Attributes:
        name: unique rule name.
        metric: a name of ``collector.alerts.metrics.METRICS``.
        op: comparison.
        threshold: the value compared with.
        for_s: how long the condition must hold before firing (pending until then).
        resolve: hysteresis: a firing alert resolves only once the value no longer
            satisfies ``metric OP resolve`` (None: ``threshold``).
        severity: free text (``page``, ``ticket``, ``warning`` ...).
        labels: added to events and notifications.
        selector: which targets (empty: all).
    """

    name: str
    metric: str
    op: str
    threshold: float
    for_s: float = 0.0
    resolve: float | None = None
    severity: str = "warning"
    labels: Mapping[str, str] = field(default_factory=dict)
    selector: Selector = field(default_factory=Selector)

    @property
    def expr(self) -> str:
        tail = f" for {self.for_s:g}s" if self.for_s else ""
        return f"{self.metric} {self.op} {self.threshold:g}{tail}"

    def holds(self, value: float) -> bool:
        return OPS[self.op](value, self.threshold)

    def still_firing(self, value: float) -> bool:
        """Whether a firing alert stays firing (hysteresis)."""
        limit = self.threshold if self.resolve is None else self.resolve
        return OPS[self.op](value, limit)

    def to_info(self) -> AlertRuleInfo:
        return AlertRuleInfo(
            name=self.name,
            kind=THRESHOLD_KIND,
            metric=self.metric,
            op=self.op,
            threshold=self.threshold,
            for_s=self.for_s,
            severity=self.severity,
            labels=dict(self.labels),
            config={"resolve": self.resolve, "selector": self.selector.as_dict()},
        )

    @classmethod
    def from_info(cls, info: AlertRuleInfo) -> ThresholdRule:
        return cls(
            name=info.name,
            metric=info.metric or "",
            op=info.op or ">",
            threshold=info.threshold if info.threshold is not None else 0.0,
            for_s=info.for_s,
            resolve=info.config.get("resolve"),
            severity=info.severity,
            labels=dict(info.labels),
            selector=Selector(**info.config.get("selector", {})),
        )


def parse_rule(text: str, *, name: str, severity: str = "warning") -> ThresholdRule:
    """Parse the shorthand, e.g. ``kv_usage > 0.9 for 5m``.

    Raises:
        ConfigError: not the shorthand, or an unknown metric.
    """
    m = _SHORTHAND.match(text)
    if not m:
        raise ConfigError(f"rule {text!r} is not understood; write {SHORTHAND_FORM}")
    metric_def(m["metric"])
    value = float(m["value"]) / (100.0 if m["pct"] else 1.0)
    if not math.isfinite(value):
        raise ConfigError(f"rule {text!r}: the value {m['value']} is not a finite number")
    for_s = parse_duration_s(m["for"], field_name="'for'") if m["for"] else 0.0
    return ThresholdRule(
        name=name, metric=m["metric"], op=m["op"], threshold=value, for_s=for_s, severity=severity
    )


def load_rules_file(path: str | Path) -> list[ThresholdRule]:
    """Read a threshold-rule YAML file.

    Raises:
        ConfigError: naming the file, line and field.
    """
    text = read_text(path, "rules file", ConfigError)
    return parse_rules_yaml(text, source=str(path))


def parse_rules_yaml(text: str, *, source: str = "<string>") -> list[ThresholdRule]:
    """Parse the text of a rules file (see :func:`load_rules_file`)."""
    data, lines = read_yaml(text, source=source, error=ConfigError)
    items = data.get("rules") if isinstance(data, Mapping) else None
    if not isinstance(items, list):
        raise ConfigError(f"{source}:1: expected a list under 'rules'; see docs/alerts.md")

    rules: list[ThresholdRule] = []
    for i, item in enumerate(items):

        def fail(key: str | None, msg: str, i: int = i) -> ConfigError:
            line = lines.get(("rules", i, key), lines.get(("rules", i), 1))
            where = f"field {key!r}: " if key else ""
            return ConfigError(f"{source}:{line}: {where}{msg}")

        rules.append(_parse_item(item, fail))
    seen: set[str] = set()
    for i, r in enumerate(rules):
        if r.name in seen:
            at = lines.get(("rules", i, "name"), 1)
            raise ConfigError(f"{source}:{at}: field 'name': {r.name!r} is used twice")
        seen.add(r.name)
    return rules


def _parse_item(item: Any, fail: Callable[..., ConfigError]) -> ThresholdRule:
    if not isinstance(item, Mapping):
        raise fail(None, "each rule must be a mapping with name and expr")
    unknown = sorted(set(item) - _KEYS)
    if unknown:
        raise fail(unknown[0], f"unknown field; allowed: {', '.join(sorted(_KEYS))}")
    name = item.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise fail("name", "required: lowercase letters, digits and '-_.' (e.g. kv-full)")
    severity = str(item.get("severity", "warning"))
    if "expr" in item:
        text = str(item["expr"])
    elif {"metric", "op", "threshold"} <= set(item):
        text = f"{item['metric']} {item['op']} {item['threshold']}"
        if "for" in item:
            text += f" for {item['for']}"
    else:
        raise fail("expr", f"give 'expr' ({SHORTHAND_FORM}) or metric, op and threshold")
    try:
        rule = parse_rule(text, name=name, severity=severity)
    except ConfigError as e:
        raise fail("expr" if "expr" in item else "metric", str(e)) from e
    resolve = item.get("resolve")
    if resolve is not None and (
        isinstance(resolve, bool)
        or not isinstance(resolve, int | float)
        or not math.isfinite(resolve)
    ):
        raise fail("resolve", "must be a number (the value that resolves a firing alert)")
    if resolve is not None and rule.op in ("==", "!="):
        raise fail("resolve", "hysteresis needs a comparison (> >= < <=), not == or !=")
    labels = item.get("labels") or {}
    selector = item.get("selector") or {}
    if not isinstance(labels, Mapping):
        raise fail("labels", "must be a mapping of strings")
    if not isinstance(selector, Mapping) or set(selector) - {"model", "pool", "target"}:
        raise fail("selector", "must be a mapping of model / pool / target")
    return ThresholdRule(
        name=rule.name,
        metric=rule.metric,
        op=rule.op,
        threshold=rule.threshold,
        for_s=rule.for_s,
        resolve=None if resolve is None else float(resolve),
        severity=severity,
        labels={str(k): str(v) for k, v in labels.items()},
        selector=Selector(**{str(k): str(v) for k, v in selector.items()}),
    )


def delete_threshold_rule(store: Store, name: str) -> None:
    """Delete a threshold rule with its events.

    Raises:
        ConfigError: no threshold rule has this name (an SLO's rules go with its SLO).
    """
    kinds = {r.name: r.kind for r in list_alert_rules(store)}
    if kinds.get(name) != THRESHOLD_KIND:
        hint = "; delete its SLO with `slotune slo delete`" if name in kinds else ""
        raise ConfigError(
            f"no threshold rule named {name!r}{hint}; see the names with `slotune alerts list`"
        )
    delete_alert_rules(store, [name])
