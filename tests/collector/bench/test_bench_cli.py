"""``slotune bench`` as a process: run, store, list, compare, errors; and a run against the
emulated engine (``slotune emulate``) checked against the engine's own timings file."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _tools import SLOTUNE, running_emulator
from bench_fakes import FakeEngine

from slotune.collector.bench import ArrivalSpec, BenchConfig, Endpoint, run_benchmark
from slotune.collector.store import upgrade

REPO = Path(__file__).resolve().parents[3]


def _slotune(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SLOTUNE, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout_s
    )


@pytest.mark.slow
def test_run_store_list_and_compare(
    fake_engine: Callable[..., FakeEngine], sqlite_url: str, tmp_path: Path
) -> None:
    engine = fake_engine()
    upgrade(sqlite_url)
    saved = tmp_path / "run.json"
    proc = _slotune(
        "--db",
        sqlite_url,
        "bench",
        "--url",
        engine.url,
        "--input-len",
        "uniform:8,16",
        "--output-len",
        "4",
        "--rate",
        "100",
        "--num-requests",
        "6",
        "--warmup",
        "1",
        "--slo",
        "ttft:p99<=2s",
        "--name",
        "cli-run",
        "--json",
        "--save",
        str(saved),
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["run_id"] == 1 and out["summary"]["num_completed"] == 6
    assert out["summary"]["slos_met"] is True and out["model"] == "fake-model"
    assert len(json.loads(saved.read_text())["records"]) == 6
    listed = json.loads(_slotune("--db", sqlite_url, "bench", "list", "--json").stdout)
    assert [r["run_id"] for r in listed] == [1] and listed[0]["name"] == "cli-run"
    cmp = _slotune("--db", sqlite_url, "bench", "compare", "1", str(saved))
    assert cmp.returncode == 0 and "ttft_ms.p99" in cmp.stdout and "#1 cli-run" in cmp.stdout


def test_max_rate_search_from_the_command_line(fake_engine: Callable[..., FakeEngine]) -> None:
    engine = fake_engine()
    proc = _slotune(
        "bench",
        "--url",
        engine.url,
        "--input-len",
        "8",
        "--output-len",
        "2",
        "--rate",
        "50",
        "--num-requests",
        "4",
        "--slo",
        "ttft:p99<=2s",
        "--find-max-rate",
        "--max-rate-steps",
        "3",
        "--no-store",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    # no queueing in the fake engine: every probe passes, so the search doubles 3 times
    assert [p["rate"] for p in out["curve"]] == [50.0, 100.0, 200.0]
    assert out["max_rate"] == 200.0 and out["converged"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [
                "--url",
                "http://127.0.0.1:9",
                "--input-len",
                "8",
                "--output-len",
                "2",
                "--rate",
                "1",
                "--slo",
                "ttft<=5",
            ],
            "not understood",
        ),
        (
            ["--url", "http://127.0.0.1:9", "--input-len", "8", "--output-len", "2", "--rate", "1"],
            "cannot reach",
        ),
    ],
)
def test_bad_invocations_exit_1_with_one_line(args: list[str], message: str) -> None:
    proc = _slotune("bench", "--no-store", *args)
    assert proc.returncode == 1
    assert message in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    timings = tmp_path / "timings.jsonl"
    with running_emulator(timings, speedup=4) as url:
        yield url, timings


def _engine_lines(timings: Path, ids: set[str]) -> dict[str, dict[str, Any]]:
    # The engine writes a request's line once it has handed the last token to the stream,
    # so on a loaded host the client can read the end of a stream first.
    deadline = time.monotonic() + 30
    while True:
        lines = {t["request_id"]: t for t in map(json.loads, timings.read_text().splitlines())}
        if ids <= lines.keys() or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


def test_client_timings_agree_with_the_emulated_engine(emulator: tuple[str, Path]) -> None:
    url, timings = emulator
    config = BenchConfig(
        url=url,
        arrival=ArrivalSpec.from_rate(40.0),
        input_len="256",
        output_len="uniform:8,24",
        num_requests=12,
        endpoint=Endpoint.CHAT,
    )
    result = run_benchmark(config)
    assert result.summary.num_errors == 0
    engine = _engine_lines(timings, {r.request_id for r in result.records})
    for r in result.records:
        t = engine[r.request_id]
        assert r.output_tokens == t["completion_tokens"] == len(t["token_times_s"])
        assert sum(r.chunk_tokens) == r.output_tokens
        assert r.input_tokens == t["prompt_tokens"]
        # The client sends before the engine's arrival and reads after its tokens, so each
        # span on the client's clock holds the engine's span on its own.
        assert r.first_token_s is not None and r.end_s is not None
        assert r.first_token_s - r.send_s >= t["first_token_s"] - t["arrival_s"]
        assert r.end_s - r.send_s >= t["token_times_s"][-1] - t["arrival_s"]


@pytest.mark.slow
def test_exit_status_when_every_request_fails_and_on_a_missed_slo(
    fake_engine: Callable[..., FakeEngine],
) -> None:
    from bench_fakes import Mode

    failing = fake_engine(mode_of=lambda _rid: Mode.HTTP_429)
    common = ("--input-len", "8", "--output-len", "4", "--rate", "100", "--num-requests", "3")
    proc = _slotune("bench", "--url", failing.url, *common, "--no-store", "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["summary"]["num_errors"] == 3  # still reported
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("error: every measured request failed (3 http_4xx)")
    )
    healthy = fake_engine()
    proc = _slotune("bench", "--url", healthy.url, *common, "--no-store", "--slo", "ttft:p99<=1us")
    assert proc.returncode == 0, proc.stderr  # a missed SLO fails a run only when asked
    proc = _slotune(
        "bench",
        "--url",
        healthy.url,
        *common,
        "--no-store",
        "--slo",
        "ttft:p99<=1us",
        "--fail-on-slo",
    )
    assert proc.returncode == 3
    assert "SLO missed: ttft-p99" in proc.stderr


def test_credentials_in_the_url_are_neither_printed_nor_stored(
    fake_engine: Callable[..., FakeEngine], sqlite_url: str, tmp_path: Path
) -> None:
    engine = fake_engine()
    upgrade(sqlite_url)
    host = engine.url.removeprefix("http://")
    saved = tmp_path / "run.json"
    proc = _slotune(
        "--db",
        sqlite_url,
        "bench",
        "--url",
        f"http://user:PW-S3CRET@{host}",
        "--input-len",
        "8",
        "--output-len",
        "4",
        "--rate",
        "100",
        "--num-requests",
        "2",
        "--json",
        "--save",
        str(saved),
    )
    assert proc.returncode == 0, proc.stderr
    listed = _slotune("--db", sqlite_url, "bench", "list", "--json")
    for text in (proc.stdout, proc.stderr, saved.read_text(), listed.stdout):
        assert "PW-S3CRET" not in text
    assert json.loads(listed.stdout)[0]["url"] == f"http://user:***@{host}"


def test_requests_longer_than_the_models_context_are_refused_before_sending(
    tmp_path: Path,
) -> None:
    with running_emulator(tmp_path / "timings.jsonl", speedup=50.0) as url:
        proc = _slotune(
            "bench",
            "--url",
            url,
            "--input-len",
            "140000",
            "--output-len",
            "4",
            "--rate",
            "10",
            "--num-requests",
            "2",
            "--no-store",
        )
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
    assert "requests ask more tokens than llama-3.1-8b's context of 131072" in proc.stderr
