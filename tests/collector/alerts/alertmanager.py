"""A real Alertmanager (Debian's ``prometheus-alertmanager``) on 127.0.0.1 for tests, and
waiting for a Prometheus-family server to be ready."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _tools import free_port, require_binary

START_DEADLINE_S = 120.0  # generous: a loaded machine starts it slowly


class Alertmanager:
    """The running server: its base URL and a reader of its alerts."""

    def __init__(self, url: str) -> None:
        self.url = url

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts it holds as not resolved (``GET /api/v2/alerts``)."""
        with urllib.request.urlopen(self.url + "/api/v2/alerts", timeout=30) as r:
            return list(json.load(r))

    def num_received(self) -> float:
        """How many alerts it was sent (its own ``alertmanager_alerts_received_total``)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            lines = r.read().decode().splitlines()
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in lines
            if line.startswith("alertmanager_alerts_received_total{")
        )


def wait_ready(url: str, proc: subprocess.Popen[bytes], what: str, log: Path | None = None) -> None:
    """Wait until a Prometheus-family server at ``url`` answers ``/-/ready``."""
    deadline = time.monotonic() + START_DEADLINE_S
    while True:
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what} did not start: " + (log.read_text() if log else ""))
        time.sleep(0.2)


@contextlib.contextmanager
def running_alertmanager(
    tmp_path: Path, webhook_url: str, *, resolve_timeout: str = "5m"
) -> Iterator[Alertmanager]:
    """Alertmanager routing every alert at once to ``webhook_url`` (resolved ones too)."""
    binary = require_binary("prometheus-alertmanager", "prometheus-alertmanager")
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        f"""global:
  resolve_timeout: {resolve_timeout}
route:
  receiver: hook
  group_by: ['...']
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: {webhook_url}/
        send_resolved: true
"""
    )
    port = free_port()
    log = (tmp_path / "alertmanager.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={tmp_path / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, "alertmanager", tmp_path / "alertmanager.log")
        yield Alertmanager(url)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
