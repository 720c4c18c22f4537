"""``slotune emulate --vllm-version V`` against /metrics dumps of the real vLLM release V.

The dumps in tests/data/vllm were captured from vLLM's CPU build serving the tiny model after
a few completions (tests/data/vllm/SOURCES.md). Compared: every family, its type, its label
names, the values of its enumerated labels (``finished_reason``, ``reason``, ``source``, …) and
its bucket bounds. Not compared: values, help texts, and the values of ``cache_config_info``
(they describe the real machine's cache).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _tools import running_emulator
from parity_shapes import FamilyShape, family_shapes, shape_diff

DATA = Path(__file__).resolve().parents[2] / "data" / "vllm"
# Labels whose values name the server, not the metric's meaning.
_SERVER_LABELS = {"model_name", "engine"}


def vllm_shapes(text: str) -> dict[str, FamilyShape]:
    return family_shapes(text, "vllm:", _SERVER_LABELS, opaque={"vllm:cache_config_info"})


@pytest.fixture
def emulated_metrics(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """/metrics of ``slotune emulate --vllm-version <param>`` after a few completions."""
    flags = ("--max-model-len", "2048", "--vllm-version", request.param)
    with (
        running_emulator(tmp_path / "timings.jsonl", speedup=50, extra_args=flags) as url,
        httpx.Client(timeout=30) as client,
    ):
        for max_tokens in (4, 16):
            body = {"prompt": "The engine keeps the keys", "max_tokens": max_tokens}
            client.post(f"{url}/v1/completions", json=body).raise_for_status()
        yield client.get(f"{url}/metrics").text


@pytest.mark.parametrize("emulated_metrics", ["0.32.0"], indirect=True)
def test_emulator_serves_the_families_of_real_vllm(emulated_metrics: str) -> None:
    real = vllm_shapes((DATA / "metrics-0.32.0.txt").read_text(encoding="utf-8"))
    assert shape_diff(real, vllm_shapes(emulated_metrics)) == []


@pytest.mark.parametrize("emulated_metrics", ["0.33.0"], indirect=True)
def test_0_33_serves_what_0_32_does_plus_one_cache_config_field(emulated_metrics: str) -> None:
    # vLLM 0.33.0's wheel has the same v1/metrics/loggers.py and perf.py as 0.32.0; its
    # CacheConfig gained simple_cpu_offload_num_blocks.
    real = vllm_shapes((DATA / "metrics-0.32.0.txt").read_text(encoding="utf-8"))
    info = real["vllm:cache_config_info"]
    real["vllm:cache_config_info"] = FamilyShape(
        info.type,
        info.label_names | {"simple_cpu_offload_num_blocks"},
        info.label_values,
        info.bucket_bounds,
    )
    assert shape_diff(real, vllm_shapes(emulated_metrics)) == []
