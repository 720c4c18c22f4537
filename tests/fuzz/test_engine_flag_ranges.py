"""Engine flags out of range are refused with the accepted range, never taken as the default."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotune.collector.errors import ConfigError
from slotune.tuner.sim.flags import parse_engine_flags


@pytest.mark.parametrize(
    ("engine", "argv", "message"),
    [
        ("vllm", ["--max-model-len", "0"], "at least 1"),
        ("vllm", ["--max-model-len", "1e999k"], "invalid length"),
        ("vllm", ["--tensor-parallel-size", "0"], "at least 1"),
        ("vllm", ["--max-num-seqs", "-3"], "at least 1"),
        ("vllm", ["--gpu-memory-utilization", "nan"], "finite"),
        ("trtllm", ["--tp_size", "0"], "at least 1"),
        ("trtllm", ["--kv_cache_free_gpu_memory_fraction", "inf"], "finite"),
    ],
)
def test_out_of_range_engine_flags(engine: str, argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_engine_flags(argv, engine=engine, model="llama-3.1-8b", gpu="h100-sxm")


@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary", b"[" * 100_000])
def test_extra_llm_api_options_that_are_not_yaml_text(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "extra.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match="--extra_llm_api_options"):
        parse_engine_flags(
            ["--extra_llm_api_options", str(path)],
            engine="trtllm",
            model="llama-3.1-8b",
            gpu="h100-sxm",
        )
