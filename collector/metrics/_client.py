"""A client of the Prometheus HTTP query API, which Prometheus, Thanos Querier, Mimir and
VictoriaMetrics all serve (``/api/v1/query``, ``/query_range``, ``/series``, ``/labels``).

Every failure is one :class:`~collector.errors.MetricsUnavailable` line naming the URL with
its credentials masked and what to check: unreachable, a 4xx/5xx or malformed reply, a reply
larger than :data:`MAX_REPLY_BYTES` (read in chunks and cut there, never held whole), or a
query past its timeout. Header values are never printed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from slotune.collector.errors import MetricsUnavailable
from slotune.collector.redact import redact_url

MAX_REPLY_BYTES = 64 * 1024 * 1024
TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a query's result: its labels and its (ts, value) points."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]

    @property
    def value(self) -> float:
        """The newest value (an instant query has exactly one)."""
        return self.points[-1][1]


class PromClient:
    """Reads one query API base URL (``http://127.0.0.1:9090``, a Thanos or Mimir
    ``/prometheus`` prefix, a VictoriaMetrics ``/select/0/prometheus``).

    Args:
        base_url: the API's base; ``/api/v1/...`` is appended.
        headers: sent with every request (an ``Authorization`` or tenant header); never printed.
        timeout_s: per request, also sent to the server as the query's ``timeout``.
        max_reply_bytes: a longer reply is refused.
    """

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        *,
        timeout_s: float = TIMEOUT_S,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.shown_url = redact_url(self.base_url)
        self.timeout_s = timeout_s
        self.max_reply_bytes = max_reply_bytes
        self._http = httpx.Client(
            headers=dict(headers or {}), timeout=timeout_s, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def query(self, expr: str, at_ts: float) -> list[Series]:
        """An instant query at ``at_ts``."""
        return self._vector(self._data("query", {"query": expr, "time": _ts(at_ts)}), expr)

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[Series]:
        """A range query: one point per ``step_s`` from ``start`` to ``end``."""
        params = {"query": expr, "start": _ts(start), "end": _ts(end), "step": f"{step_s:g}"}
        return self._vector(self._data("query_range", params), expr)

    def series(self, match: Sequence[str], start: float, end: float) -> list[dict[str, str]]:
        """The label sets of the series any of ``match`` selects between two times."""
        params = [("match[]", m) for m in match] + [("start", _ts(start)), ("end", _ts(end))]
        data = self._data("series", params)
        if not isinstance(data, list):
            raise self._malformed("series", "data is not a list")
        return [{str(k): str(v) for k, v in d.items()} for d in data if isinstance(d, dict)]

    def labels(self) -> list[str]:
        """Every label name the API knows."""
        data = self._data("labels", {})
        if not isinstance(data, list):
            raise self._malformed("labels", "data is not a list")
        return [str(x) for x in data]

    def label_values(self, label: str) -> list[str]:
        """Every value of one label (``__name__``: every metric name)."""
        data = self._data(f"label/{label}/values", {})
        if not isinstance(data, list):
            raise self._malformed(f"label/{label}/values", "data is not a list")
        return [str(x) for x in data]

    def _data(self, path: str, params: Mapping[str, str] | Sequence[tuple[str, str]]) -> Any:
        url = f"{self.base_url}/api/v1/{path}"
        items = list(params.items()) if isinstance(params, Mapping) else list(params)
        if path.startswith("query"):
            items.append(("timeout", f"{self.timeout_s:g}s"))
        where = f"{self.shown_url}/api/v1/{path}"
        try:
            with self._http.stream("POST", url, data=dict(_merge(items))) as reply:
                body = self._read(reply, where)
                status = reply.status_code
        except httpx.TimeoutException:
            raise MetricsUnavailable(
                f"metrics API {where} did not answer within {self.timeout_s:g} s: check the "
                "server's load, or narrow the query (fewer targets, a shorter window)"
            ) from None
        except httpx.HTTPError as e:
            raise MetricsUnavailable(
                f"metrics API {where} is unreachable ({type(e).__name__}): check --metrics "
                "/ SLOTUNE_METRICS and that the server is running"
            ) from None
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise self._malformed(path, f"HTTP {status}, not a JSON object")
        if status >= 400 or doc.get("status") != "success":
            error = str(doc.get("error", ""))[:300] or "no error text"
            raise MetricsUnavailable(
                f"metrics API {where} answered HTTP {status}: {error}; check the URL (a "
                "Prometheus-compatible base such as http://host:9090) and its credentials"
            )
        return doc.get("data")

    def _read(self, reply: httpx.Response, where: str) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in reply.iter_bytes():
            size += len(chunk)
            if size > self.max_reply_bytes:
                raise MetricsUnavailable(
                    f"metrics API {where} replied more than {self.max_reply_bytes} bytes: "
                    "narrow the query (fewer targets, a shorter window)"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _malformed(self, path: str, why: str) -> MetricsUnavailable:
        return MetricsUnavailable(
            f"metrics API {self.shown_url}/api/v1/{path} sent a malformed reply ({why}): is "
            "--metrics a Prometheus-compatible query API?"
        )

    def _vector(self, data: Any, expr: str) -> list[Series]:
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            raise self._malformed("query", "no result list")
        kind = data.get("resultType")
        if kind not in ("vector", "matrix"):
            raise self._malformed("query", f"result type {kind!r}, not a vector or matrix")
        out = []
        try:
            for item in data["result"]:
                labels = {str(k): str(v) for k, v in item.get("metric", {}).items()}
                pairs = [item["value"]] if kind == "vector" else item["values"]
                out.append(Series(labels, tuple((float(t), float(v)) for t, v in pairs)))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise self._malformed("query", f"a result of {expr[:80]!r} lacks its values") from None
        return out


def _ts(ts: float) -> str:
    return f"{ts:.3f}"


def _merge(items: Sequence[tuple[str, str]]) -> dict[str, str | list[str]]:
    merged: dict[str, str | list[str]] = {}
    for k, v in items:
        prev = merged.get(k)
        if prev is None:
            merged[k] = v
        elif isinstance(prev, list):
            prev.append(v)
        else:
            merged[k] = [prev, v]
    return merged
