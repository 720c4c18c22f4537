"""``slotune emulate`` as a process on the simulator's real engine core: start-up failures
worded like the engine, clean shutdown on SIGTERM/SIGINT, streams timed like its timings file."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _tools import SLOTUNE, free_port
from emulate_helpers import stream
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[3]
MODEL = "llama-3.1-8b"


class ServerProcess:
    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "slotune.tuner.emulate", "--port", str(self.port), *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: list[str] = []
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.append(line)
            if "Starting slotune emulated" in line:
                return
        assert self.proc.stderr is not None
        raise AssertionError(f"server did not start: {self.log} {self.proc.stderr.read()}")

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> tuple[int, str, str]:
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=15)
        return self.proc.returncode, "".join(self.log) + out, err


@pytest.fixture
def vllm_server(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        "--model",
        MODEL,
        "--gpu",
        "h100-sxm",
        "--max-num-seqs",
        "64",
        "--enable-prefix-caching",
        "--speedup",
        "4",
        "--timings-file",
        str(tmp_path / "timings.jsonl"),
    )
    yield server
    if server.proc.poll() is None:
        server.stop()


def test_invalid_configuration_fails_like_the_engine_before_binding() -> None:
    port = free_port()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slotune.tuner.emulate",
            "--model",
            MODEL,
            "--port",
            str(port),
            "--max-num-seqs",
            "4096",
            "--max-num-batched-tokens",
            "2048",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert (
        "max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096)."
    ) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "Starting" not in proc.stdout
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # nothing bound it


def test_cli_reports_weights_that_do_not_fit_and_exits_1() -> None:
    proc = subprocess.run(
        [SLOTUNE, "emulate", "--model", "llama-3.1-70b", "--gpu", "l4", "--port", str(free_port())],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "error:" in proc.stderr and "out of memory" in proc.stderr.lower()


def test_unknown_flag_is_refused() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "slotune.tuner.emulate", "--model", MODEL, "--max-num-seq", "8"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "unrecognized arguments: --max-num-seq" in proc.stderr


def test_streams_metrics_and_timings_on_the_real_core(
    vllm_server: ServerProcess, tmp_path: Path
) -> None:
    log = "".join(vllm_server.log)
    assert "GPU KV cache size:" in log and "Maximum concurrency" in log
    shared = "You are a helpful assistant. " * 40
    with httpx.Client(timeout=30) as client:
        streams = [
            stream(
                client,
                f"{vllm_server.url}/v1/chat/completions",
                {
                    "model": MODEL,
                    "max_tokens": 8,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                    "messages": [
                        {"role": "system", "content": shared},
                        {"role": "user", "content": f"question {i}"},
                    ],
                },
                headers={"X-Request-Id": f"r{i}"},
            )
            for i in range(3)
        ]
        metrics = client.get(f"{vllm_server.url}/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(metrics)}
    hits = families["vllm:prefix_cache_hits"].samples[0].value
    assert hits > 0  # the shared system prompt is cached after the first request
    code, _, err = vllm_server.stop()
    assert code == 0 and "Traceback" not in err
    lines = {
        d["request_id"]: d
        for d in map(json.loads, (tmp_path / "timings.jsonl").read_text().splitlines())
    }
    for i, s in enumerate(streams):
        server = lines[f"r{i}"]
        tokens = s.token_events("chat")
        assert server["completion_tokens"] == 8 == len(tokens)
        assert server["first_token_s"] <= tokens[0][0]
        # The client's TTFT holds the engine's: it starts earlier and ends later.
        assert tokens[0][0] - s.send_s >= server["first_token_s"] - server["arrival_s"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_a_stream_shuts_down_cleanly(sig: signal.Signals) -> None:
    server = ServerProcess("--model", MODEL)
    got_first = threading.Event()

    def client() -> None:
        try:
            with (
                httpx.Client(timeout=30) as c,
                c.stream(
                    "POST",
                    f"{server.url}/v1/completions",
                    json={"prompt": "go", "max_tokens": 100000, "stream": True},
                ) as r,
            ):
                for _ in r.iter_lines():
                    got_first.set()
        except httpx.HTTPError:
            pass  # the server cut the stream, as intended

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    assert got_first.wait(20)
    code, out, err = server.stop(sig)
    thread.join(15)
    assert code == 0, err
    assert "Shutting down" in out
    assert "Traceback" not in err and "Traceback" not in out


def test_a_kv_cache_too_small_for_a_few_requests_is_warned_at_start() -> None:
    server = ServerProcess("--engine", "trtllm", MODEL, "--max_num_tokens", "495000")
    code, out, _ = server.stop()
    assert code == 0
    assert (
        "WARNING" in out
        and "The KV cache holds only 7,200 tokens: room for 3.5 requests of 2,048" in out
    )
