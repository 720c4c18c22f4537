"""A real Prometheus on loopback over a backfilled TSDB (``promtool tsdb create-blocks-from``)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from _tools import free_port, require_binary
from alertmanager import wait_ready


def backfill(openmetrics: Path, tsdb: Path) -> None:
    """TSDB blocks from an OpenMetrics file (its samples carry their timestamps)."""
    promtool = require_binary("promtool", "prometheus")
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(tsdb)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@contextlib.contextmanager
def serving(tsdb: Path) -> Iterator[str]:
    """Prometheus over ``tsdb`` (scraping nothing, keeping everything); yields its URL."""
    binary = require_binary("prometheus", "prometheus")
    config = tsdb.parent / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1m}\nscrape_configs: []\n")
    port = free_port()
    server = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tsdb}",
            "--storage.tsdb.retention.time=10y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, server, "prometheus")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)
