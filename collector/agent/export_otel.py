"""OpenTelemetry metrics over OTLP (HTTP/protobuf or gRPC) with GenAI semantic-convention names.

Engines expose cumulative Prometheus histograms, not single observations, so the agent
builds OTLP data points itself (``ExportMetricsServiceRequest``) instead of going through
the SDK's instruments:

============================  ====================================  ======================
canonical                     OTLP metric                           bucket boundaries (s)
============================  ====================================  ======================
``ttft``                      ``gen_ai.server.time_to_first_token``  0.001 ... 10 (16)
``tpot``                      ``gen_ai.server.time_per_output_token``  0.01 ... 2.5 (13)
``e2e``                       ``gen_ai.server.request.duration``    0.01 ... 81.92 (14)
other histograms              ``slotune.<name>`` (engine's buckets)
counters / gauges             ``slotune.<name>`` (Sum, monotonic / Gauge)
============================  ====================================  ======================

The three GenAI histograms use the boundaries the semantic conventions recommend. The
engine's cumulative count at such a boundary is exact when the engine has a bucket there
(vLLM's TTFT buckets contain all 16), otherwise interpolated linearly inside the engine's
bucket, as Prometheus' ``histogram_quantile`` would. ``min``/``max`` are left unset (the engine
does not expose them).

Attributes: ``gen_ai.provider.name`` is the engine kind (``vllm``, ``sglang``, ``trtllm``:
the conventions have no well-known value for self-hosted engines); ``gen_ai.operation.name``
is ``generate``, because an engine's histograms pool chat and text completions;
``gen_ai.request.model`` the served model; ``server.address`` / ``server.port`` the engine's.
The resource carries ``service.name=slotune-agent`` and ``host.name``.

Temporality is cumulative; a series' start time is when the agent first saw it and moves to
the previous scrape whenever the series drops (an engine restart).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import grpc
import httpx
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2_grpc import (
    MetricsServiceStub,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from slotune.collector.agent.base import Family, Labels, MetricType, Scrape
from slotune.collector.agent.canonical import CANONICAL
from slotune.collector.agent.targets import TargetSpec
from slotune.collector.errors import ConfigError

log = logging.getLogger(__name__)

TTFT_BOUNDS_S = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
TPOT_BOUNDS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
REQUEST_DURATION_BOUNDS_S = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
GENAI_HISTOGRAMS: dict[str, tuple[str, tuple[float, ...]]] = {
    "ttft": ("gen_ai.server.time_to_first_token", TTFT_BOUNDS_S),
    "tpot": ("gen_ai.server.time_per_output_token", TPOT_BOUNDS_S),
    "e2e": ("gen_ai.server.request.duration", REQUEST_DURATION_BOUNDS_S),
}
_CUMULATIVE = pb.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
_NS = 1_000_000_000


class OtlpProtocol:
    """The two OTLP transports."""

    HTTP = "http"
    GRPC = "grpc"


def rebucket(
    buckets: Sequence[tuple[float, float]], count: float, bounds: Sequence[float]
) -> list[int]:
    """Per-bucket counts at new boundaries from a cumulative histogram.

    Args:
        buckets: (upper bound, cumulative count) sorted by bound; +Inf optional.
        count: total observations.
        bounds: the new explicit boundaries.

    Returns:
        ``len(bounds) + 1`` non-cumulative counts summing to ``count``.
    """
    finite = [(le, c) for le, c in buckets if le != float("inf")]
    cumulative: list[int] = []
    for b in bounds:
        value = _cumulative_at(finite, b)
        prev = cumulative[-1] if cumulative else 0
        cumulative.append(min(max(round(value), prev), round(count)))
    counts = [cumulative[0]] + [b - a for a, b in itertools.pairwise(cumulative)]
    counts.append(max(round(count) - (cumulative[-1] if cumulative else 0), 0))
    return counts


def _cumulative_at(finite: Sequence[tuple[float, float]], bound: float) -> float:
    lower_le, lower_c = 0.0, 0.0
    for le, c in finite:
        if le == bound:
            return c
        if le > bound:
            width = le - lower_le
            return lower_c + (c - lower_c) * ((bound - lower_le) / width if width > 0 else 1.0)
        lower_le, lower_c = le, c
    return lower_c  # above the engine's last finite bucket: not known to be below ``bound``


def _kv(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


@dataclass(frozen=True, slots=True)
class _Latest:
    target: TargetSpec
    scrape: Scrape
    ts: float


class OtlpExporter:
    """Pushes the newest canonical series of every target to an OTLP endpoint.

    Args:
        endpoint: ``http://host:4318`` (``/v1/metrics`` appended when no path) for HTTP,
            ``host:4317`` or ``http://host:4317`` for gRPC.
        protocol: ``http`` or ``grpc``.
        node: host name put on the resource.
        timeout_s: limit for one export.
    """

    def __init__(
        self,
        endpoint: str,
        protocol: str = OtlpProtocol.HTTP,
        *,
        node: str,
        timeout_s: float = 10.0,
    ) -> None:
        if protocol not in (OtlpProtocol.HTTP, OtlpProtocol.GRPC):
            raise ConfigError(f"--otlp-protocol {protocol!r}: use http or grpc")
        self.protocol = protocol
        self.endpoint = _endpoint(endpoint, protocol)
        self.node = node
        self.timeout_s = timeout_s
        self._latest: dict[str, _Latest] = {}
        self._starts: dict[tuple[str, str, Labels], tuple[int, float]] = {}
        self._last_ts: dict[str, float] = {}
        self._pushed_ts: dict[str, float] = {}
        self._is_ok = True
        self._channel: grpc.aio.Channel | None = None

    def update(self, target: TargetSpec, scrape: Scrape | None, ts: float) -> None:
        """Remember a successful scrape and track the start time of every series."""
        if scrape is None:
            return
        prev_ts = self._last_ts.get(target.name, ts)
        for fam in scrape.canonical:
            for labels, value in _cumulative_values(fam):
                key = (target.name, fam.name, labels)
                start = self._starts.get(key)
                if start is None or value < start[1]:
                    start_ns = int((prev_ts if start else ts) * _NS)
                    self._starts[key] = (start_ns, value)
                else:
                    self._starts[key] = (start[0], value)
        self._last_ts[target.name] = ts
        self._latest[target.name] = _Latest(target, scrape, ts)

    def build_request(self) -> ExportMetricsServiceRequest:
        """The export request for the newest scrape of every target."""
        metrics: dict[str, pb.Metric] = {}
        for latest in self._latest.values():
            for fam in latest.scrape.canonical:
                self._add_family(metrics, latest, fam)
        resource = Resource(
            attributes=[_kv("service.name", "slotune-agent"), _kv("host.name", self.node)]
        )
        scope = InstrumentationScope(name="slotune.agent")
        return ExportMetricsServiceRequest(
            resource_metrics=[
                pb.ResourceMetrics(
                    resource=resource,
                    scope_metrics=[pb.ScopeMetrics(scope=scope, metrics=list(metrics.values()))],
                )
            ]
        )

    async def push(self) -> None:
        """Send the scrapes that arrived since the last push; log failures once."""
        fresh = {n: lt.ts for n, lt in self._latest.items() if self._pushed_ts.get(n) != lt.ts}
        if not fresh:
            return
        request = self.build_request()
        try:
            if self.protocol == OtlpProtocol.HTTP:
                await self._post(request)
            else:
                await self._export_grpc(request)
        except (httpx.HTTPError, grpc.RpcError, OSError) as e:
            if self._is_ok:
                log.warning("OTLP export to %s failed: %s", self.endpoint, e)
            self._is_ok = False
            return
        if not self._is_ok:
            log.info("OTLP export to %s works again", self.endpoint)
        self._is_ok = True
        self._pushed_ts.update(fresh)

    async def _post(self, request: ExportMetricsServiceRequest) -> None:
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            resp = await client.post(
                self.endpoint,
                content=request.SerializeToString(),
                headers={"Content-Type": "application/x-protobuf"},
            )
            resp.raise_for_status()

    async def _export_grpc(self, request: ExportMetricsServiceRequest) -> None:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(self.endpoint)
        stub = MetricsServiceStub(self._channel)  # type: ignore[no-untyped-call]
        await stub.Export(request, timeout=self.timeout_s)

    def close(self) -> None:
        """Drop the gRPC channel (its sockets close with the event loop)."""
        self._channel = None

    def _add_family(self, metrics: dict[str, pb.Metric], latest: _Latest, fam: Family) -> None:
        canonical = CANONICAL[fam.name]
        name, bounds = GENAI_HISTOGRAMS.get(fam.name, (f"slotune.{fam.name}", ()))
        metric = metrics.get(name)
        if metric is None:
            metric = pb.Metric(name=name, description=canonical.description, unit=canonical.unit)
            metrics[name] = metric
        now_ns = int(latest.ts * _NS)

        def start_of(labels: Labels) -> int:
            return self._starts.get((latest.target.name, fam.name, labels), (now_ns, 0.0))[0]

        if fam.type is MetricType.HISTOGRAM:
            metric.histogram.aggregation_temporality = _CUMULATIVE
            for labels, (buckets, total, count) in _histogram_points(fam):
                explicit = bounds or tuple(le for le, _ in buckets if le != float("inf"))
                metric.histogram.data_points.append(
                    pb.HistogramDataPoint(
                        attributes=self._attributes(latest.target, labels),
                        start_time_unix_nano=start_of(labels),
                        time_unix_nano=now_ns,
                        count=round(count),
                        sum=total,
                        explicit_bounds=explicit,
                        bucket_counts=rebucket(buckets, count, explicit),
                    )
                )
            return
        for s in fam.samples:
            point = pb.NumberDataPoint(
                attributes=self._attributes(latest.target, s.labels),
                time_unix_nano=now_ns,
                as_double=s.value,
            )
            if fam.type is MetricType.COUNTER:
                metric.sum.aggregation_temporality = _CUMULATIVE
                metric.sum.is_monotonic = True
                point.start_time_unix_nano = start_of(s.labels)
                metric.sum.data_points.append(point)
            else:
                metric.gauge.data_points.append(point)

    def _attributes(self, target: TargetSpec, labels: Labels) -> list[KeyValue]:
        attrs = {k: v for k, v in labels if k != "model_name"}
        model = dict(labels).get("model_name") or target.labels.get("model", "")
        out = [_kv("slotune.target", target.name)]
        if target.kind.is_engine:
            out += [
                _kv("gen_ai.provider.name", target.kind.value),
                _kv("gen_ai.operation.name", "generate"),
            ]
            if model:
                out.append(_kv("gen_ai.request.model", model))
            parts = urlsplit(target.url)
            if parts.hostname:
                out.append(_kv("server.address", parts.hostname))
                if parts.port:
                    out.append(_kv("server.port", parts.port))
        out += [_kv(k, v) for k, v in sorted(attrs.items())]
        return out


def _endpoint(endpoint: str, protocol: str) -> str:
    parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    if not parts.netloc:
        raise ConfigError(f"--otlp-endpoint {endpoint!r}: write http://host:port")
    if protocol == OtlpProtocol.GRPC:
        return parts.netloc
    path = parts.path if parts.path not in ("", "/") else "/v1/metrics"
    return f"{parts.scheme}://{parts.netloc}{path}"


_HistogramPoint = tuple[list[tuple[float, float]], float, float]


def _histogram_points(fam: Family) -> Iterable[tuple[Labels, _HistogramPoint]]:
    """(labels without ``le``, (sorted buckets, sum, count)) per series of a histogram."""
    groups: dict[Labels, tuple[list[tuple[float, float]], list[float], list[float]]] = {}
    for s in fam.samples:
        labels = tuple((k, v) for k, v in s.labels if k != "le")
        buckets, sums, counts = groups.setdefault(labels, ([], [], []))
        if s.name.endswith("_bucket"):
            buckets.append((float(s.label("le", "inf")), s.value))
        elif s.name.endswith("_sum"):
            sums.append(s.value)
        elif s.name.endswith("_count"):
            counts.append(s.value)
    for labels, (buckets, sums, counts) in groups.items():
        buckets.sort()
        count = counts[0] if counts else (buckets[-1][1] if buckets else 0.0)
        yield labels, (buckets, sums[0] if sums else 0.0, count)


def _cumulative_values(fam: Family) -> Iterable[tuple[Labels, float]]:
    if fam.type is MetricType.COUNTER:
        for s in fam.samples:
            yield s.labels, s.value
    elif fam.type is MetricType.HISTOGRAM:
        for labels, (_, _, count) in _histogram_points(fam):
            yield labels, count
