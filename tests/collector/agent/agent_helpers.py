"""Helpers of the agent's tests: an HTTP server serving scripted metrics, the data files."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from sqlalchemy import text

from slotune.collector.store import open_store

DATA = Path(__file__).parent / "data"
# The scrape timeout of tests that do not test timeouts: a loaded machine never reaches it.
SCRAPE_SLACK_S = 60.0


# path -> body factory (called on every GET, so a test can script changing values)
Routes = dict[str, Callable[[], str | tuple[str, str]]]


class MetricsServer:
    """A real HTTP server on 127.0.0.1 answering GETs from a routes table."""

    def __init__(self, routes: Routes) -> None:
        self.routes = routes
        self.num_gets: dict[str, int] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                make = server.routes.get(self.path)
                if make is None:
                    self.send_error(404)
                    return
                server.num_gets[self.path] = server.num_gets.get(self.path, 0) + 1
                out = make()
                body, ctype = out if isinstance(out, tuple) else (out, "text/plain")
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                """Quiet."""

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> MetricsServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def data_text(name: str) -> str:
    """A file of tests/collector/agent/data."""
    return (DATA / name).read_text()


TTFT_BOUNDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32)


def vllm_exposition(
    ttft_per_bucket: list[int],
    *,
    generation_tokens: float = 0.0,
    waiting: float = 0.0,
    kv_usage: float = 0.0,
    model: str = "m",
) -> str:
    """A small vLLM V1 exposition: TTFT histogram (counts per bucket, last one is +Inf),
    generation tokens, waiting requests, KV usage."""
    labels = f'engine="0",model_name="{model}"'
    lines = ["# TYPE vllm:time_to_first_token_seconds histogram"]
    cumulative = 0
    for le, n in zip((*TTFT_BOUNDS, "+Inf"), ttft_per_bucket, strict=True):
        cumulative += n
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{{labels},le="{le}"}} {cumulative}')
    lines += [
        f"vllm:time_to_first_token_seconds_count{{{labels}}} {cumulative}",
        f"vllm:time_to_first_token_seconds_sum{{{labels}}} {0.05 * cumulative}",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{labels}}} {generation_tokens}",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{labels}}} {waiting}",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{labels}}} {kv_usage}",
    ]
    return "\n".join(lines) + "\n"


def models_json(model: str) -> tuple[str, str]:
    """An OpenAI /v1/models body."""
    return (
        f'{{"object": "list", "data": [{{"id": "{model}", "object": "model"}}]}}',
        "application/json",
    )


def samples_of(url: str, target: str) -> dict[str, int]:
    """How many samples the store holds for each series name of one target."""
    with open_store(url) as store, store.connection() as conn:
        rows = conn.execute(
            text(
                "SELECT s.name, count(*) FROM sample x JOIN metric_series s ON s.id = x.series_id "
                "JOIN target t ON t.id = s.target_id WHERE t.name = :t GROUP BY s.name"
            ),
            {"t": target},
        ).all()
    return {str(name): int(n) for name, n in rows}
