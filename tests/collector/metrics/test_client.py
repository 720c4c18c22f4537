"""The query API client on bad replies: one clear line each, never a secret, never a hang."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from _tools import free_port

from slotune.collector.alerts.sli_prom import PromSliReader
from slotune.collector.errors import ConfigError, MetricsUnavailable
from slotune.collector.metrics import PromClient, open_metrics
from slotune.collector.slo import parse_slo

Reply = tuple[int, bytes, float]  # status, body, seconds to wait first
OK_EMPTY = b'{"status":"success","data":{"resultType":"vector","result":[]}}'


@pytest.fixture
def api() -> Iterator[Callable[[Reply], str]]:
    """A loopback HTTP server answering every request with the reply it is given."""
    servers: list[ThreadingHTTPServer] = []

    def start(reply: Reply) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, body, wait_s = reply
                time.sleep(wait_s)
                with contextlib.suppress(OSError):  # a client that timed out has gone
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://user:hunter2@127.0.0.1:{server.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def _error(client: PromClient) -> str:
    with pytest.raises(MetricsUnavailable) as e:
        client.query("up", 0.0)
    text = str(e.value)
    assert "hunter2" not in text and "s3cret" not in text
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ((500, b'{"status":"error","error":"boom"}', 0.0), "HTTP 500: boom"),
        ((400, b'{"status":"error","errorType":"bad_data","error":"parse error"}', 0.0), "400"),
        ((404, b"404 page not found", 0.0), "malformed"),
        ((200, b"<html>not json</html>", 0.0), "malformed"),
        ((200, b'{"status":"success","data":{"resultType":"vector","result":[{}]}}', 0.0), "lacks"),
        ((200, b'{"status":"success","data":{"resultType":"scalar","result":[]}}', 0.0), "type"),
    ],
)
def test_a_bad_reply_is_one_line(api: Callable[[Reply], str], reply: Reply, says: str) -> None:
    client = PromClient(api(reply), {"Authorization": "Bearer s3cret"})
    assert says in _error(client)


def test_a_reply_too_large_is_cut_off(api: Callable[[Reply], str]) -> None:
    client = PromClient(api((200, OK_EMPTY + b" " * 4096, 0.0)), max_reply_bytes=1024)
    assert "more than 1024 bytes" in _error(client)


def test_a_slow_query_times_out(api: Callable[[Reply], str]) -> None:
    client = PromClient(api((200, OK_EMPTY, 3.0)), timeout_s=0.2)
    assert "did not answer within 0.2 s" in _error(client)


def test_an_unreachable_url() -> None:
    client = PromClient(f"http://user:hunter2@127.0.0.1:{free_port()}")
    assert "unreachable" in _error(client)


def test_an_unknown_metric_reads_as_no_data(api: Callable[[Reply], str]) -> None:
    reader = PromSliReader(PromClient(api((200, OK_EMPTY, 0.0))), 1_700_000_000.0)
    slo = parse_slo("ttft:p99<=500ms")
    assert reader.counts(slo, [3600.0]).counts == (None,)
    assert reader.newest_ts(slo) is None


def test_metrics_url_must_be_http() -> None:
    assert open_metrics(None) is None
    with pytest.raises(ConfigError, match="not an http"):
        open_metrics("postgresql://u:pw@h/db")
