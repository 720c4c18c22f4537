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
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from slotune.collector import textfile
from slotune.collector.errors import ConfigError, SLOSpecError
from slotune.collector.records import RequestRecord

SHORTHAND_FORMS = "ttft:p99<=500ms, itl:p95<=50ms, tpot:p90<=40ms, e2e:p99<=20s or error_rate<=1%"
_LATENCY_RE = re.compile(
    r"^\s*(?P<sli>ttft|itl|tpot|e2e)\s*:\s*p(?P<pct>\d+(?:\.\d+)?)\s*(?:<=|<|≤)\s*"
    r"(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>us|µs|ms|s|m)\s*$",
    re.IGNORECASE,
)
_ERROR_RE = re.compile(
    r"^\s*error_rate\s*(?:<=|<|≤)\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>%?)\s*$", re.IGNORECASE
)
# Accepted ranges: a latency objective beyond a day, or an error-budget window outside a
# minute .. a year, is a typo, and once stored it would be rendered as text no parser reads.
MAX_LATENCY_THRESHOLD_S = 86400.0
MIN_WINDOW_S = 60.0
MAX_WINDOW_S = 366 * 86400.0
_DURATION_RE = re.compile(r"^\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>us|µs|ms|s|m|h|d|w)\s*$")
_UNIT_S = {
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,127}$")


class SLI(StrEnum):
    TTFT = "ttft"
    ITL = "itl"
    TPOT = "tpot"
    E2E = "e2e"
    ERROR_RATE = "error_rate"

    @property
    def is_per_request(self) -> bool:
        """Whether one request is good or bad on its own (``ttft``, ``tpot``, ``e2e``)."""
        return self in (SLI.TTFT, SLI.TPOT, SLI.E2E)

    @property
    def event(self) -> str:
        """What the SLI counts: ``token`` (gaps) for ``itl``, else ``request``."""
        return "token" if self is SLI.ITL else "request"


def parse_duration_s(text: str | float | int, *, field_name: str = "duration") -> float:
    """Parse ``500ms``, ``20s``, ``5m``, ``30d`` (or a bare number of seconds) into seconds."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text) if abs(text) < 1e300 else math.inf  # 400-digit ints overflow float
        if not (math.isfinite(value) and value >= 0):
            raise SLOSpecError(f"{field_name}: {text!r} is not a duration of 0 or more seconds")
        return value
    m = _DURATION_RE.match(str(text))
    if not m:
        raise SLOSpecError(
            f"{field_name}: {text!r} is not a duration; write a number with a unit "
            "(us, ms, s, m, h, d, w), e.g. 500ms or 30d"
        )
    return float(m["value"]) * _UNIT_S[m["unit"]]


@dataclass(frozen=True, slots=True)
class Selector:
    """Which traffic an SLO covers; empty fields match everything."""

    model: str | None = None
    pool: str | None = None
    target: str | None = None

    def as_dict(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (("model", self.model), ("pool", self.pool), ("target", self.target))
            if v is not None
        }


@dataclass(frozen=True, slots=True)
class BurnWindow:
    """One multi-window burn-rate condition: alert when the burn rate over both the long and
    the short window exceeds ``factor`` (the short window makes the alert reset quickly)."""

    severity: str
    long_s: float
    short_s: float
    factor: float


@dataclass(frozen=True, slots=True)
class Alerting:
    """How an SLO alerts (the ``alerting:`` block of the SLO file).

    Attributes:
        enabled: False turns the SLO's burn-rate alerts off.
        windows: the burn-rate conditions; empty means the SRE workbook's defaults scaled to
            the SLO window (see ``collector.alerts.policy``).
        labels: labels added to every alert of the SLO.
    """

    enabled: bool = True
    windows: tuple[BurnWindow, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SLO:
    """One objective.

    Attributes:
        name: unique name (lowercase, digits, ``-_.``).
        sli: which indicator.
        threshold: seconds for latency SLIs; a fraction (0.01 = 1 %) for ``error_rate``.
        percentile: the pQ of the shorthand (99.0 for p99); None for ``error_rate``.
        objective: fraction of good requests required (defaults to percentile / 100;
            for ``error_rate``, 1 - threshold).
        window_s: the SLO window in seconds (error budget period).
        selector: label selector.
        description: free text.
        interpolate: with engine histograms whose bucket bounds miss the threshold, count
            requests between the two nearest bounds linearly instead of using the bound at
            or below the threshold (conservative).
        alerting: how the SLO alerts.
    """

    name: str
    sli: SLI
    threshold: float
    percentile: float | None = None
    objective: float = 0.99
    window_s: float = 30 * 86400.0
    selector: Selector = field(default_factory=Selector)
    description: str = ""
    interpolate: bool = False
    alerting: Alerting = field(default_factory=Alerting)

    @property
    def spec(self) -> str:
        """The shorthand form of this SLO."""
        if self.sli is SLI.ERROR_RATE:
            return f"error_rate<={_fmt_num(self.threshold * 100)}%"
        return f"{self.sli.value}:p{_fmt_num(self.percentile or 0)}<={_fmt_latency(self.threshold)}"

    def value_of(self, record: RequestRecord) -> float | None:
        """The request's own SLI value in seconds (None when not defined for it, and for
        ``itl`` and ``error_rate``, which no request has on its own)."""
        if self.sli is SLI.TTFT:
            return record.ttft_s
        if self.sli is SLI.E2E:
            return record.e2e_s
        if self.sli is SLI.TPOT:
            return record.tpot_s
        return None

    def is_good(self, record: RequestRecord) -> bool:
        """Whether one request meets this SLO, as goodput counts it. Failed requests are
        never good; a completed one always is for ``itl`` (pooled over the run's token gaps,
        see :func:`evaluate`) and ``error_rate``."""
        if not record.is_ok:
            return False
        if not self.sli.is_per_request:
            return True
        value = self.value_of(record)
        # A request with no defined value (e.g. TPOT of a one-token output) cannot break it.
        return value is None or value <= self.threshold

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": self.spec,
            "sli": self.sli.value,
            "percentile": self.percentile,
            "threshold": self.threshold,
            "objective": self.objective,
            "window_s": self.window_s,
            "selector": self.selector.as_dict(),
            "description": self.description,
        }


def _fmt_num(x: float) -> str:
    return f"{x:g}"


def _fmt_latency(seconds: float) -> str:
    if seconds >= 1 and float(seconds).is_integer():
        return f"{seconds:g}s"
    return f"{seconds * 1000:g}ms"


def default_name(sli: SLI, percentile: float | None) -> str:
    return sli.value if percentile is None else f"{sli.value}-p{_fmt_num(percentile)}"


def parse_slo(
    spec: str,
    *,
    name: str | None = None,
    window_s: float = 30 * 86400.0,
    selector: Selector | None = None,
) -> SLO:
    """Parse the command-line shorthand, e.g. ``ttft:p99<=500ms`` or ``error_rate<=1%``.

    Raises:
        SLOSpecError: the text does not match an accepted form.
    """
    if not MIN_WINDOW_S <= window_s <= MAX_WINDOW_S:
        raise SLOSpecError(
            f"SLO {spec!r}: window {window_s:g} s is out of range; use 1m to 366d (e.g. 30d)"
        )
    m = _LATENCY_RE.match(spec)
    if m:
        pct = float(m["pct"])
        if not 0 < pct < 100:
            raise SLOSpecError(
                f"SLO {spec!r}: percentile p{m['pct']} must be between 0 and 100 (e.g. p99)"
            )
        sli = SLI(m["sli"].lower())
        threshold = float(m["value"]) * _UNIT_S[m["unit"].lower()]  # the pattern ignores case
        if not 0 < threshold <= MAX_LATENCY_THRESHOLD_S:
            raise SLOSpecError(
                f"SLO {spec!r}: the threshold must be greater than zero and at most 1 day "
                f"({MAX_LATENCY_THRESHOLD_S:g}s)"
            )
        return SLO(
            name=name or default_name(sli, pct),
            sli=sli,
            threshold=threshold,
            percentile=pct,
            objective=pct / 100.0,
            window_s=window_s,
            selector=selector or Selector(),
        )
    m = _ERROR_RE.match(spec)
    if m:
        value = float(m["value"])
        frac = value / 100.0 if m["unit"] == "%" else value
        if not 0 <= frac < 1:
            raise SLOSpecError(f"SLO {spec!r}: the error rate must be below 100 %")
        return SLO(
            name=name or "error-rate",
            sli=SLI.ERROR_RATE,
            threshold=frac,
            percentile=None,
            objective=1.0 - frac,
            window_s=window_s,
            selector=selector or Selector(),
        )
    raise SLOSpecError(f"SLO {spec!r} is not understood; accepted forms: {SHORTHAND_FORMS}")


def parse_slos(specs: Iterable[str]) -> list[SLO]:
    """Parse several shorthands; names must end up unique."""
    slos = [parse_slo(s) for s in specs]
    _check_unique(slos, where="--slo")
    return slos


def _check_unique(slos: list[SLO], *, where: str) -> None:
    seen: set[str] = set()
    for s in slos:
        if s.name in seen:
            raise SLOSpecError(f"{where}: two SLOs are named {s.name!r}; give each a unique name")
        seen.add(s.name)


# --- YAML files -------------------------------------------------------------------------

_FILE_FORM = """accepted form:
  slos:
    - name: chat-ttft            # unique, lowercase
      spec: ttft:p99<=500ms      # or: sli/percentile/threshold fields
      window: 30d                # optional, default 30d
      objective: 99.5%           # optional, default from the percentile
      selector: {model: llama-3.1-8b, pool: chat}   # optional
      interpolate: false         # optional: between histogram bucket bounds
      alerting:                  # optional: burn-rate alerts (default: SRE workbook pairs)
        windows: [{severity: page, long: 1h, short: 5m, factor: 14.4}]"""

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


def _line_map(node: yaml.Node) -> dict[tuple[Any, ...], int]:
    """Map key paths to 1-based line numbers, so errors can point at the file line.

    Walked with a stack, and never into a node that contains itself (``&a [*a]``), so neither
    a recursive alias nor deep nesting can exhaust the stack here.
    """
    lines: dict[tuple[Any, ...], int] = {}
    stack: list[tuple[yaml.Node, tuple[Any, ...], frozenset[int]]] = [(node, (), frozenset())]
    while stack:
        n, path, ancestors = stack.pop()
        lines.setdefault(path, n.start_mark.line + 1)
        if id(n) in ancestors:
            continue
        inside = ancestors | {id(n)}
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                lines[(*path, k.value)] = k.start_mark.line + 1
                stack.append((v, (*path, k.value), inside))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend((item, (*path, i), inside) for i, item in enumerate(n.value))
    return lines


def load_slo_file(path: str | Path) -> list[SLO]:
    """Read an SLO YAML file.

    Raises:
        SLOSpecError: naming the file, line and field, with the accepted form.
    """
    return parse_slo_yaml(read_text(path, "SLO file"), source=str(path))


def read_text(path: str | Path, what: str, error: type[ConfigError] = SLOSpecError) -> str:
    """A UTF-8 text file's content, read through :func:`slotune.collector.textfile.read_text`
    (regular files only, bounded).

    Raises:
        ``error``: the file cannot be read, naming it and ``what`` it should be.
    """
    return textfile.read_text(path, what, error)


# PyYAML parses flow collections recursively: near a thousand levels it takes seconds per
# file before it runs out of stack, so deeper nesting is refused before it starts.
MAX_YAML_FLOW_DEPTH = 100
_FLOW = re.compile(r"[\[\]{}]")


def _deepest_flow(text: str) -> int:
    """How deep ``[`` and ``{`` nest (counted in strings and comments too: a bound, not a
    parse)."""
    depth = deepest = 0
    for m in _FLOW.finditer(text):
        depth = depth + 1 if m[0] in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, with a tagged value it cannot convert (``!!int 0xzz``,
    ``!!float abc``, ``!!timestamp notatime``, a 5,000-digit integer) reported as a YAML
    error at its line instead of escaping as the converter's own exception."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, AttributeError, OverflowError) as e:
            tag = node.tag.removeprefix("tag:yaml.org,2002:")
            value = node.value if isinstance(node, yaml.ScalarNode) else type(node).__name__
            text = repr(value) if len(str(value)) <= 40 else f"{str(value)[:40]!r}..."
            raise yaml.constructor.ConstructorError(
                None, None, f"!!{tag} {text} is not a valid {tag}", node.start_mark
            ) from e


def read_yaml(
    text: str, *, source: str, error: type[ConfigError] = SLOSpecError
) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """Parse YAML text; returns the data (None when empty) and the line of each key path.

    Raises:
        ``error``: not valid YAML, naming ``source`` and the line.
    """
    documents = read_yaml_documents(text, source=source, error=error)
    return documents[0] if documents else (None, {})


def read_yaml_documents(
    text: str, *, source: str, error: type[ConfigError] = SLOSpecError
) -> list[tuple[Any, dict[tuple[Any, ...], int]]]:
    """Every document of a multi-document YAML text, each with the line of each key path.

    Raises:
        ``error``: not valid YAML, naming ``source`` and the line.
    """
    if _deepest_flow(text) > MAX_YAML_FLOW_DEPTH:
        raise error(
            f"{source}: nests deeper than YAML can be read ([ and {{ more than "
            f"{MAX_YAML_FLOW_DEPTH} levels deep; no configuration needs that)"
        )
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
        datas = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise error(f"{source}{line}: not valid YAML ({getattr(e, 'problem', e)})") from e
    except RecursionError:
        raise error(f"{source}: nests deeper than YAML can be read") from None
    return [
        (data, _line_map(node)) for node, data in zip(nodes, datas, strict=True) if node is not None
    ]


def parse_slo_yaml(text: str, *, source: str = "<string>") -> list[SLO]:
    """Parse the text of an SLO YAML file (see :func:`load_slo_file`)."""
    data, lines = read_yaml(text, source=source)
    if data is None:
        raise SLOSpecError(f"{source}: the file is empty; {_FILE_FORM}")

    def fail(path: tuple[Any, ...], msg: str) -> SLOSpecError:
        line = lines.get(path, lines.get(path[:-1], 1))
        return SLOSpecError(f"{source}:{line}: {msg}")

    items = data.get("slos") if isinstance(data, Mapping) else data
    base: tuple[Any, ...] = ("slos",) if isinstance(data, Mapping) else ()
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


def _parse_item(item: Any, path: tuple[Any, ...], fail: Any) -> SLO:
    if not isinstance(item, Mapping):
        raise fail(path, f"each SLO must be a mapping; {_FILE_FORM}")
    unknown = set(item) - _ALLOWED_KEYS
    if unknown:
        key = sorted(unknown)[0]
        allowed = ", ".join(sorted(_ALLOWED_KEYS))
        raise fail((*path, key), f"unknown field {key!r}; allowed: {allowed}")
    name = item.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
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
        objective = _parse_fraction(item["objective"], (*path, "objective"), fail)
        slo = SLO(**{**_fields(slo), "objective": objective})
    if item.get("description"):
        slo = SLO(**{**_fields(slo), "description": str(item["description"])})
    if "interpolate" in item:
        if not isinstance(item["interpolate"], bool):
            raise fail((*path, "interpolate"), "field 'interpolate' must be true or false")
        slo = SLO(**{**_fields(slo), "interpolate": item["interpolate"]})
    if "alerting" in item:
        alerting = _parse_alerting(item["alerting"], (*path, "alerting"), fail)
        slo = SLO(**{**_fields(slo), "alerting": alerting})
    return slo


def _parse_alerting(value: Any, path: tuple[Any, ...], fail: Any) -> Alerting:
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


def _parse_window(value: Any, path: tuple[Any, ...], fail: Any) -> BurnWindow:
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


def _fields(slo: SLO) -> dict[str, Any]:
    return {f: getattr(slo, f) for f in SLO.__slots__}


def _spec_from_fields(item: Mapping[str, Any], path: tuple[Any, ...], fail: Any) -> str:
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


def _parse_fraction(value: Any, path: tuple[Any, ...], fail: Any) -> float:
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


def _parse_selector(value: Any, path: tuple[Any, ...], fail: Any) -> Selector:
    if value is None:
        return Selector()
    if not isinstance(value, Mapping):
        raise fail(path, "field 'selector' must be a mapping of model / pool / target")
    unknown = set(value) - _SELECTOR_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise fail((*path, key), f"selector field {key!r} is unknown; allowed: model, pool, target")
    return Selector(**{k: str(v) for k, v in value.items()})


# --- maths ------------------------------------------------------------------------------


def weighted_percentile(
    values: list[float] | np.ndarray, weights: list[int] | np.ndarray, q: float
) -> float:
    """Percentile ``q`` (0-100) of values repeated by integer weights (linear interpolation)."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=np.int64)
    if v.size == 0:
        return float("nan")
    if np.all(w == 1):
        return float(np.percentile(v, q))
    return float(np.percentile(np.repeat(v, w), q))


@dataclass(frozen=True, slots=True)
class Attainment:
    """How one SLO fared over a set of requests.

    Attributes:
        slo: the SLO.
        num_good: good events (``slo.sli.event``: token gaps for ``itl``, else requests).
        num_total: all events.
        value: the aggregate: the observed percentile in seconds, or the error rate.
    """

    slo: SLO
    num_good: int
    num_total: int
    value: float | None

    @property
    def attainment(self) -> float:
        return self.num_good / self.num_total if self.num_total else 0.0

    @property
    def is_met(self) -> bool:
        if self.num_total == 0:
            return False
        if self.slo.sli is SLI.ERROR_RATE:
            return self.value is not None and self.value <= self.slo.threshold
        return self.attainment >= self.slo.objective - 1e-12

    def to_dict(self) -> dict[str, Any]:
        unit_ms = self.slo.sli is not SLI.ERROR_RATE
        return {
            "name": self.slo.name,
            "spec": self.slo.spec,
            "attainment": self.attainment,
            "objective": self.slo.objective,
            "met": self.is_met,
            "value": (self.value * 1000 if unit_ms else self.value)
            if self.value is not None
            else None,
            "unit": "ms" if unit_ms else "ratio",
            "event": self.slo.sli.event,
            "num_good": self.num_good,
            "num_total": self.num_total,
        }


def evaluate(slo: SLO, records: list[RequestRecord]) -> Attainment:
    """Good fraction and aggregate value of one SLO over finished and failed requests.

    ``itl`` counts the token gaps of the completed requests, pooled (each gap weighted by its
    chunk's tokens), exactly as the engine's histogram and the summary's ``itl_ms`` do.
    """
    total = len(records)
    if slo.sli is SLI.ERROR_RATE:
        bad = sum(1 for r in records if not r.is_ok)
        return Attainment(slo, total - bad, total, bad / total if total else None)
    if slo.sli is SLI.ITL:
        gaps, tokens = pooled_itl_gaps([r for r in records if r.is_ok])
        value = weighted_percentile(gaps, tokens, slo.percentile or 99.0) if gaps.size else None
        num_good = int(tokens[gaps <= slo.threshold].sum())
        return Attainment(slo, num_good, int(tokens.sum()), value)
    good = sum(1 for r in records if slo.is_good(r))
    values = [v for r in records if r.is_ok and (v := slo.value_of(r)) is not None]
    agg = float(np.percentile(values, slo.percentile or 99.0)) if values else None
    return Attainment(slo, good, total, agg)


def pooled_itl_gaps(records: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Every record's ``itl_gaps_s()`` pooled in record order, as (gaps, tokens) arrays.

    Same values as looping over ``itl_gaps_s()``, computed on all chunks at once: a
    simulated run carries millions of chunks, which a per-chunk loop takes seconds to walk.
    """
    lengths = [min(len(r.chunk_times_s), len(r.chunk_tokens)) for r in records]
    times = np.fromiter(
        chain.from_iterable(r.chunk_times_s[:k] for r, k in zip(records, lengths, strict=True)),
        dtype=float,
        count=sum(lengths),
    )
    tokens = np.fromiter(
        chain.from_iterable(r.chunk_tokens[:k] for r, k in zip(records, lengths, strict=True)),
        dtype=np.int64,
        count=sum(lengths),
    )
    owner = np.repeat(np.arange(len(records)), lengths)
    keep = tokens > 0
    times, tokens, owner = times[keep], tokens[keep], owner[keep]
    same = owner[1:] == owner[:-1]
    return ((times[1:] - times[:-1]) / tokens[1:])[same], tokens[1:][same]
