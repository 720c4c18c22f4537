"""``--metrics URL`` / ``SLOTUNE_METRICS``: where metrics are read."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from slotune.collector.errors import ConfigError
from slotune.collector.metrics._client import PromClient
from slotune.collector.redact import redact_url


def open_metrics(url: str | None, headers: Mapping[str, str] | None = None) -> PromClient | None:
    """The query API client for ``url``; None (no URL) means the SQL store.

    Raises:
        ConfigError: ``url`` is not an ``http(s)://`` URL.
    """
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"--metrics {redact_url(url)!r} is not an http(s):// URL: give a Prometheus-"
            "compatible query API (http://127.0.0.1:9090, a Thanos, Mimir or "
            "VictoriaMetrics base URL), or leave it out to read the store"
        )
    return PromClient(url, headers)
