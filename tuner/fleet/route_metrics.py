"""The proxy's own Prometheus metrics, served at ``/metrics`` of ``slotune route``.

Counters: ``slotune_route_decisions_total{policy,pool,backend}`` (requests routed),
``slotune_route_shed_total{policy,reason}`` (429/503 answers; reason ``policy``,
``max_in_flight`` or ``no_backend``), ``slotune_route_upstream_errors_total{backend,kind}``
(kind ``connect``, ``connect_timeout``, ``timeout``, ``status``, ``stream``, ``protocol``). Histogram:
``slotune_route_overhead_seconds`` (request received -> upstream request sent: body
parsing plus the policy's choice). Per-backend gauges read at scrape time:
``slotune_route_backend_up`` (1 while its circuit is closed), ``slotune_route_backend_state``
(one series per state, 1 on the current one), ``slotune_route_backend_in_flight`` and the
load the proxy last read from the engine (``..._running``, ``..._waiting``, ``..._kv_usage``).

Plain Prometheus text: the agent scrapes the proxy like any target.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from slotune.tuner.fleet.route_backend import Backend
from slotune.tuner.fleet.route_breaker import BreakerState

_OVERHEAD_BUCKETS_S = (5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 5e-2)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _BackendCollector(Collector):
    def __init__(self, backends: Iterable[Backend]) -> None:
        self._backends = tuple(backends)

    def collect(self) -> Iterator[Metric]:
        labels = ["backend", "pool", "model"]
        up = GaugeMetricFamily(
            "slotune_route_backend_up", "1 while the backend's circuit is closed.", labels=labels
        )
        state = GaugeMetricFamily(
            "slotune_route_backend_state",
            "Circuit state of the backend: 1 on the current state.",
            labels=[*labels, "state"],
        )
        gauges = {
            "in_flight": GaugeMetricFamily(
                "slotune_route_backend_in_flight", "Requests the proxy has open.", labels=labels
            ),
            "running": GaugeMetricFamily(
                "slotune_route_backend_running", "Running requests (engine).", labels=labels
            ),
            "waiting": GaugeMetricFamily(
                "slotune_route_backend_waiting", "Waiting requests (engine).", labels=labels
            ),
            "kv_usage": GaugeMetricFamily(
                "slotune_route_backend_kv_usage", "KV-cache usage 0..1 (engine).", labels=labels
            ),
        }
        for b in self._backends:
            values = [b.spec.name, b.spec.pool, b.spec.model]
            current = b.state()
            up.add_metric(values, 1.0 if current is BreakerState.CLOSED else 0.0)
            for s in BreakerState:
                state.add_metric([*values, s.value], 1.0 if s is current else 0.0)
            gauges["in_flight"].add_metric(values, b.in_flight)
            gauges["running"].add_metric(values, b.num_running)
            gauges["waiting"].add_metric(values, b.num_waiting)
            gauges["kv_usage"].add_metric(values, b.kv_usage)
        yield up
        yield state
        yield from gauges.values()


class RouteMetrics:
    """The proxy's registry and the counters the request path updates."""

    def __init__(self, backends: Iterable[Backend]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.decisions = Counter(
            "slotune_route_decisions",
            "Requests routed, by policy, pool and backend.",
            ["policy", "pool", "backend"],
            registry=self.registry,
        )
        self.shed = Counter(
            "slotune_route_shed",
            "Requests refused (429 or 503), by policy and reason.",
            ["policy", "reason"],
            registry=self.registry,
        )
        self.upstream_errors = Counter(
            "slotune_route_upstream_errors",
            "Upstream failures, by backend and kind.",
            ["backend", "kind"],
            registry=self.registry,
        )
        self.overhead = Histogram(
            "slotune_route_overhead_seconds",
            "Request received to upstream request sent: parsing plus the policy's choice.",
            buckets=_OVERHEAD_BUCKETS_S,
            registry=self.registry,
        )
        self.registry.register(_BackendCollector(backends))

    def exposition(self) -> bytes:
        """The Prometheus text of every metric."""
        return generate_latest(self.registry)
