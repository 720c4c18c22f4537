"""Exports: a real Prometheus scrapes the agent; OTLP receivers decode what the agent sends."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import pytest
from _tools import free_port, require_binary
from agent_helpers import MetricsServer, Routes, vllm_exposition
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric

from slotune.collector.agent.export_otel import TTFT_BOUNDS_S, OtlpExporter, rebucket
from slotune.collector.agent.export_prom import PrometheusExporter
from slotune.collector.agent.loop import Agent, Exporter
from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import parse_target_arg
from slotune.collector.agent.writer import StoreWriter

Server = Callable[[Routes], MetricsServer]
ENGINE = vllm_exposition(
    [3, 5, 2, 0, 0, 0, 1], generation_tokens=4096, waiting=2, kv_usage=0.25, model="llama"
)


def scrape_once(db: str, tmp_path: Path, url: str, exporter: Exporter) -> None:
    target = parse_target_arg(f"vllm={url}", node="gpu-node-1")
    agent = Agent(
        [target.with_labels({"pool": "chat"})],
        StoreWriter(db, Spool(tmp_path / "spool")),
        [exporter],
    )
    try:
        asyncio.run(agent.scrape_all_once())
    finally:
        for r in agent.runners:
            r.source.close()
        agent.writer.close()


@pytest.fixture
def prometheus_server(tmp_path: Path) -> Iterator[Callable[[int], str]]:
    binary = require_binary("prometheus", "prometheus")
    procs: list[subprocess.Popen[bytes]] = []

    def start(agent_port: int) -> str:
        port = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: slotune-agent\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{agent_port}']}}]\n"
        )
        procs.append(
            subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        return f"http://127.0.0.1:{port}"

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=20)


def query(prom: str, expr: str) -> list[dict[str, object]]:
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())["data"]["result"]


def poll(prom: str, expr: str, timeout_s: float = 30.0) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            result = query(prom, expr)
            if result:
                return result
        except OSError:
            pass  # Prometheus still starting
        time.sleep(0.5)
    raise AssertionError(f"Prometheus returned nothing for {expr} within {timeout_s} s")


@pytest.mark.prometheus
@pytest.mark.slow
def test_real_prometheus_scrapes_the_agent_endpoint(
    agent_db: str, tmp_path: Path, metrics_server: Server, prometheus_server: Callable[[int], str]
) -> None:
    engine = metrics_server({"/metrics": lambda: ENGINE})
    exporter = PrometheusExporter("127.0.0.1", 0)
    try:
        scrape_once(agent_db, tmp_path, engine.url, exporter)
        prom = prometheus_server(exporter.port)
        (kv,) = poll(prom, "slotune_kv_usage")
        labels = kv["metric"]
        assert labels["node"] == "gpu-node-1" and labels["pool"] == "chat"  # type: ignore[index]
        assert labels["model_name"] == "llama" and labels["kind"] == "vllm"  # type: ignore[index]
        assert float(kv["value"][1]) == 0.25  # type: ignore[index]
        (tokens,) = poll(prom, "slotune_generation_tokens_total")
        assert float(tokens["value"][1]) == 4096.0  # type: ignore[index]
        (p50,) = poll(prom, "histogram_quantile(0.5, slotune_ttft_seconds_bucket)")
        assert float(p50["value"][1]) == pytest.approx(0.01 + 0.01 * (5.5 - 3) / 5)  # type: ignore[index]
        (up,) = poll(prom, "slotune_up")
        assert float(up["value"][1]) == 1.0  # type: ignore[index]
    finally:
        exporter.close()


class OtlpHttpReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1 that decodes ExportMetricsServiceRequest."""

    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                assert self.path == "/v1/metrics"
                assert self.headers["Content-Type"] == "application/x-protobuf"
                receiver.requests.append(ExportMetricsServiceRequest.FromString(body))
                out = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: object) -> None:
                """Quiet."""

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


def metrics_by_name(request: ExportMetricsServiceRequest) -> dict[str, Metric]:
    (rm,) = request.resource_metrics
    (sm,) = rm.scope_metrics
    return {m.name: m for m in sm.metrics}


def check_genai_request(request: ExportMetricsServiceRequest, engine_port: int) -> None:
    (rm,) = request.resource_metrics
    resource = {a.key: a.value.string_value for a in rm.resource.attributes}
    assert resource == {"service.name": "slotune-agent", "host.name": "gpu-node-1"}
    metrics = metrics_by_name(request)
    ttft = metrics["gen_ai.server.time_to_first_token"]
    assert ttft.unit == "s"
    (point,) = ttft.histogram.data_points
    assert list(point.explicit_bounds) == list(TTFT_BOUNDS_S)
    assert point.count == 11 and sum(point.bucket_counts) == 11
    # 0.01/0.02/0.04 are engine boundaries too: exact cumulative counts 3, 8, 10 there;
    # 0.001 and 0.005 lie inside the engine's first bucket: interpolated (0.3, 1.5 -> 0, 2)
    assert list(point.bucket_counts[:5]) == [0, 2, 1, 5, 2]
    assert not point.HasField("min")
    attrs = {a.key: (a.value.string_value or a.value.int_value) for a in point.attributes}
    assert attrs["gen_ai.provider.name"] == "vllm"
    assert attrs["gen_ai.request.model"] == "llama"
    assert attrs["gen_ai.operation.name"] == "generate"
    assert attrs["server.address"] == "127.0.0.1" and attrs["server.port"] == engine_port
    (tokens,) = metrics["slotune.generation_tokens"].sum.data_points
    assert tokens.as_double == 4096.0
    assert metrics["slotune.generation_tokens"].sum.is_monotonic
    (kv,) = metrics["slotune.kv_usage"].gauge.data_points
    assert kv.as_double == 0.25


def test_otlp_http_receiver_decodes_genai_metrics(
    agent_db: str, tmp_path: Path, metrics_server: Server
) -> None:
    engine = metrics_server({"/metrics": lambda: ENGINE})
    receiver = OtlpHttpReceiver()
    try:
        scrape_once(
            agent_db, tmp_path, engine.url, OtlpExporter(receiver.url, "http", node="gpu-node-1")
        )
        (request,) = receiver.requests
        check_genai_request(request, engine.httpd.server_address[1])
    finally:
        receiver.httpd.shutdown()
        receiver.httpd.server_close()


class _Collector(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []

    def Export(
        self, request: ExportMetricsServiceRequest, context: grpc.ServicerContext
    ) -> ExportMetricsServiceResponse:
        self.requests.append(request)
        return ExportMetricsServiceResponse()


def test_otlp_grpc_receiver_decodes_genai_metrics(
    agent_db: str, tmp_path: Path, metrics_server: Server
) -> None:
    engine = metrics_server({"/metrics": lambda: ENGINE})
    collector = _Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(collector, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        scrape_once(
            agent_db,
            tmp_path,
            engine.url,
            OtlpExporter(f"127.0.0.1:{port}", "grpc", node="gpu-node-1"),
        )
        (request,) = collector.requests
        check_genai_request(request, engine.httpd.server_address[1])
    finally:
        server.stop(grace=None)


def test_otlp_start_time_moves_when_a_counter_resets() -> None:
    exporter = OtlpExporter("http://127.0.0.1:1", "http", node="n")
    target = parse_target_arg("vllm=http://127.0.0.1:8000", node="n")
    from slotune.collector.agent.promtext import parse_text
    from slotune.collector.agent.vllm import VllmSource

    def scrape(tokens: float) -> object:
        body = vllm_exposition([1, 0, 0, 0, 0, 0, 0], generation_tokens=tokens)
        return VllmSource().from_families(list(parse_text(body).families))

    starts = []
    for ts, tokens in ((100.0, 50.0), (105.0, 80.0), (110.0, 10.0)):
        exporter.update(target, scrape(tokens), ts)  # type: ignore[arg-type]
        m = metrics_by_name(exporter.build_request())["slotune.generation_tokens"]
        starts.append(m.sum.data_points[0].start_time_unix_nano / 1e9)
    assert starts == [100.0, 100.0, 105.0]


def test_rebucket_is_exact_on_shared_bounds_and_interpolates_inside() -> None:
    buckets = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (float("inf"), 42.0)]
    # 0.3 is halfway through (0.1, 0.5]; 2.0 is above the last finite bound: not known below
    assert rebucket(buckets, 42.0, (0.1, 0.3, 1.0, 2.0)) == [10, 10, 20, 0, 2]
    assert sum(rebucket(buckets, 42.0, TTFT_BOUNDS_S)) == 42
