"""Small parts: server flags, the periodic engine log line, prompt token ids, the timings file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from slotune.collector.errors import ConfigError
from slotune.tuner.emulate.events import StepReport
from slotune.tuner.emulate.prompts import output_text, render_chat, token_ids_of_text
from slotune.tuner.emulate.server_args import parse_server_args
from slotune.tuner.emulate.settings import ServerSettings
from slotune.tuner.emulate.stats_log import StatsLog
from slotune.tuner.emulate.timings import TimingsFile
from slotune.tuner.sim.engine import EngineStats


def test_server_flags_are_split_from_engine_flags() -> None:
    settings, engine_argv = parse_server_args(
        [
            "meta-llama/Llama-3.1-8B-Instruct",
            "--port",
            "9000",
            "--max-num-seqs",
            "64",
            "--speedup",
            "20",
            "--enable-prefix-caching",
            "--engine",
            "vllm",
            "--seed",
            "3",
        ]
    )
    assert settings == ServerSettings(port=9000, speedup=20.0, seed=3)
    assert engine_argv == [
        "meta-llama/Llama-3.1-8B-Instruct",
        "--max-num-seqs",
        "64",
        "--enable-prefix-caching",
    ]


def test_bad_server_flags_name_the_flag() -> None:
    with pytest.raises(ConfigError, match="--speedup must be a finite number > 0"):
        parse_server_args(["--speedup", "0"])
    with pytest.raises(ConfigError, match="--speedup must be a finite number > 0"):
        parse_server_args(["--speedup", "nan"])
    with pytest.raises(ConfigError, match="--engine"):
        parse_server_args(["--engine", "tgi"])


def test_shared_prefixes_give_shared_token_ids() -> None:
    a = token_ids_of_text("You are helpful. Question one?")
    b = token_ids_of_text("You are helpful. Question two?")
    assert len(a) == 7 and a[:5] == b[:5] and a[5] != b[5]
    assert render_chat([("system", "Be brief."), ("user", "hi")]) == "system: Be brief.\nuser: hi"
    assert output_text(1, 0, 3) + output_text(1, 3, 2) == output_text(1, 0, 5)


def _report(prompt_tokens: int, generation_tokens: int) -> StepReport:
    counters = EngineStats(
        requests_running=3,
        requests_waiting=1,
        kv_usage=0.25,
        prefix_queries=200,
        prefix_hits=50,
        preemptions=0,
        prompt_tokens=0,
        generation_tokens=0,
        kv_blocks=100,
        kv_tokens=1600,
        num_steps=1,
        last_step_tokens=3,
    )
    return StepReport(
        index=1,
        duration_s=0.01,
        counters=counters,
        prompt_tokens=prompt_tokens,
        generation_tokens=generation_tokens,
        preemptions=0,
        prefix_queries=0,
        prefix_hits=0,
        new_requests_queue_s=(),
        num_context_requests=0,
        num_generation_requests=3,
        num_completed=0,
        ttfts_s=(),
        itls_s=(),
    )


def test_stats_log_writes_vllms_engine_line_only_when_busy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("test.stats_log")
    stats = StatsLog(logger)
    with caplog.at_level(logging.INFO, logger="test.stats_log"):
        stats.flush()
        assert caplog.records == []
        stats.on_step(_report(100, 3))
        stats.flush()
    line = caplog.records[-1].getMessage()
    assert line.startswith("Engine 000: Avg prompt throughput: ")
    assert (
        "Running: 3 reqs, Waiting: 1 reqs, GPU KV cache usage: 25.0%, "
        "Prefix cache hit rate: 25.0%" in line
    )


def test_unwritable_timings_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--timings-file"):
        TimingsFile(tmp_path / "missing-dir" / "t.jsonl")
