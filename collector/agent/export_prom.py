"""A Prometheus endpoint re-exporting the canonical series of every target.

Names are ``slotune_<canonical name>`` plus the unit where the canonical name has none:
``slotune_ttft_seconds`` (histogram), ``slotune_kv_usage`` (gauge, 0..1),
``slotune_vram_used_bytes``, ``slotune_prompt_tokens_total`` (counter), ``slotune_up``.
Every sample carries the target's ``target``, ``kind`` and ``node`` labels (and ``pool`` /
``model`` when set) besides the engine's own (``model_name``, ``engine``, ``gpu`` ...).
The server binds 127.0.0.1 unless told otherwise: metrics name models and hosts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.metrics_core import Metric

from slotune.collector.agent.base import MetricType, Scrape
from slotune.collector.agent.canonical import CANONICAL
from slotune.collector.agent.targets import TargetSpec
from slotune.collector.errors import ConfigError

_UNIT_SUFFIX = {"s": "_seconds", "bytes": "_bytes"}
_PROM_TYPES = {
    MetricType.COUNTER: "counter",
    MetricType.GAUGE: "gauge",
    MetricType.HISTOGRAM: "histogram",
}
_TARGET_LABELS = ("node", "pool", "model")


def prometheus_name(canonical: str) -> str:
    """The exported family name of a canonical metric (without ``_total``)."""
    return "slotune_" + canonical + _UNIT_SUFFIX.get(CANONICAL[canonical].unit, "")


class PrometheusExporter:
    """Serves the newest scrape of every target at ``http://host:port/metrics``.

    Args:
        host: address to bind (127.0.0.1 by default; 0.0.0.0 to be scraped from elsewhere).
        port: port to bind (0 picks a free one; see :attr:`port`).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 9464) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[TargetSpec, Scrape | None]] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except (OSError, OverflowError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ConfigError(
                f"--prometheus-port {port} on {host}: cannot listen ({reason}); pick a free "
                "port from 1 to 65535 or another --prometheus-host"
            ) from e
        self.host = host

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_port)

    def update(self, target: TargetSpec, scrape: Scrape | None, ts: float) -> None:
        """Remember the newest scrape of a target (a failed one keeps only ``up``)."""
        with self._lock:
            self._latest[target.name] = (target, scrape)

    async def push(self) -> None:
        """Nothing to push: Prometheus pulls."""

    def close(self) -> None:
        """Stop the HTTP server."""
        self._server.shutdown()
        self._server.server_close()

    def collect(self) -> Iterator[Metric]:
        """prometheus_client's collector hook: build families from the newest scrapes."""
        with self._lock:
            latest = list(self._latest.values())
        families: dict[str, Metric] = {}
        up = Metric("slotune_up", "1 if the last scrape of the target succeeded.", "gauge")
        for target, scrape in latest:
            base = _target_labels(target)
            up.add_sample("slotune_up", base, 1.0 if scrape is not None else 0.0)
            for fam in scrape.canonical if scrape else ():
                name = prometheus_name(fam.name)
                metric = families.get(name)
                if metric is None:
                    metric = Metric(name, CANONICAL[fam.name].description, _PROM_TYPES[fam.type])
                    families[name] = metric
                for s in fam.samples:
                    suffix = s.name[len(fam.name) :]
                    if fam.type is MetricType.COUNTER:
                        suffix = "_total"
                    metric.add_sample(name + suffix, {**dict(s.labels), **base}, s.value)
        yield up
        yield from families.values()


def _target_labels(target: TargetSpec) -> dict[str, str]:
    labels = {"target": target.name, "kind": target.kind.value}
    labels.update({k: target.labels[k] for k in _TARGET_LABELS if target.labels.get(k)})
    return labels
