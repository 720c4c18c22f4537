"""``slotune route`` in front of two real vLLM servers (the shared one and the one-at-a-time
one): every request answered through the proxy, split as the policy says, and counted by the
engine that served it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from _tools import SLOTUNE, free_port
from _vllm import SERVED_MODEL_NAME
from real_vllm_helpers import delta, read_metrics

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NUM_REQUESTS = 8


def test_route_round_robin_over_two_real_servers(
    real_vllm: str, real_vllm_one_seq: str, tmp_path: Path
) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "policy: round-robin\nbackends:\n"
        f"  - {{name: shared, url: {real_vllm}, model: {SERVED_MODEL_NAME}}}\n"
        f"  - {{name: one-seq, url: {real_vllm_one_seq}, model: {SERVED_MODEL_NAME}}}\n"
        "poll_interval: 200ms\n"
    )
    port = free_port()
    before = {url: read_metrics(url) for url in (real_vllm, real_vllm_one_seq)}
    proc = subprocess.Popen(
        [SLOTUNE, "route", "--config", str(fleet), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "Starting slotune route on http://127.0.0.1:" in line:
                break
        else:
            raise AssertionError("slotune route did not start")
        proxy = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=proxy, timeout=120) as client:
            for i in range(NUM_REQUESTS):
                if i % 2:
                    body = {
                        "model": SERVED_MODEL_NAME,
                        "max_tokens": 8,
                        "ignore_eos": True,
                        "messages": [{"role": "user", "content": f"question {i}"}],
                    }
                    r = client.post("/v1/chat/completions", json=body)
                else:
                    body = {
                        "model": SERVED_MODEL_NAME,
                        "prompt": f"request {i}",
                        "max_tokens": 8,
                        "ignore_eos": True,
                        "stream": i % 4 == 0,
                    }
                    r = client.post("/v1/completions", json=body)
                assert r.status_code == 200, r.text
            proxy_metrics = client.get("/metrics").text
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "Traceback" not in out

    served = {
        url: delta(read_metrics(url), before[url], "vllm:request_success_total")
        for url in (real_vllm, real_vllm_one_seq)
    }
    assert served == {real_vllm: NUM_REQUESTS / 2, real_vllm_one_seq: NUM_REQUESTS / 2}
    for backend in ("shared", "one-seq"):
        decisions = [
            line
            for line in proxy_metrics.splitlines()
            if line.startswith("slotune_route_decisions_total{") and f'backend="{backend}"' in line
        ]
        assert [float(line.rsplit(" ", 1)[1]) for line in decisions] == [NUM_REQUESTS / 2]
        # the proxy read the engine's own load gauges from its real /metrics
        assert any(
            line.startswith("slotune_route_backend_kv_usage{") and f'backend="{backend}"' in line
            for line in proxy_metrics.splitlines()
        ), proxy_metrics
