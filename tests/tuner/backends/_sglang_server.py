"""An SGLang-shaped HTTP server on 127.0.0.1 for the attach and watch tests.

It answers SGLang's routes with recorded responses (``data/``: ``/get_server_info`` and
``/get_model_info`` from SGLang's documentation, ``/metrics`` from a real SGLang 0.5.23); the
test swaps the metrics text to move counters between scrapes. ``paths`` limits which of the
info routes exist, to serve an older release (``/get_server_info`` only) or a newer one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
METRICS_DUMP = Path(__file__).parents[2] / "data" / "sglang" / "metrics-0.5.23.txt"
SERVER_INFO: dict[str, Any] = json.loads((DATA / "sglang_server_info.json").read_text())
MODEL_INFO: dict[str, Any] = json.loads((DATA / "sglang_model_info.json").read_text())
ALL_INFO_PATHS = ("/server_info", "/get_server_info", "/model_info", "/get_model_info")


@dataclass
class SglangServer:
    """What the server answers; change ``metrics`` between scrapes."""

    server_info: dict[str, Any] = field(default_factory=lambda: dict(SERVER_INFO))
    metrics: str = field(default_factory=METRICS_DUMP.read_text)
    paths: tuple[str, ...] = ALL_INFO_PATHS
    url: str = ""

    def answer(self, path: str) -> tuple[int, bytes, str]:
        if path in ("/health", "/health_generate"):
            return 200, b"", "text/plain"
        if path in self.paths and path.endswith("server_info"):
            return 200, json.dumps(self.server_info).encode(), "application/json"
        if path in self.paths and path.endswith("model_info"):
            return 200, json.dumps(MODEL_INFO).encode(), "application/json"
        if path == "/v1/models":
            card = {"id": MODEL_INFO["model_path"], "object": "model", "owned_by": "sglang"}
            return 200, json.dumps({"object": "list", "data": [card]}).encode(), "application/json"
        if path == "/metrics":
            return 200, self.metrics.encode(), "text/plain; version=0.0.4"
        return 404, b'{"detail":"Not Found"}', "application/json"


@contextmanager
def serving(server: SglangServer) -> Iterator[SglangServer]:
    """Serve ``server`` on a free port of 127.0.0.1 for the block."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            status, body, kind = server.answer(self.path.split("?")[0])
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
