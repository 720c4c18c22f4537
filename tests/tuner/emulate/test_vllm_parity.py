"""``slotune emulate --vllm-version V`` against /metrics dumps of the real vLLM release V.

The dumps in tests/data/vllm were captured from vLLM's CPU build serving the tiny model after
a few completions (tests/data/vllm/SOURCES.md). Compared: every family, its type, its label
names, the values of its enumerated labels (``finished_reason``, ``reason``, ``source``, …) and
its bucket bounds. Not compared: values, help texts, and the values of ``cache_config_info``
(they describe the real machine's cache).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from _tools import running_emulator
from prometheus_client.parser import text_string_to_metric_families

DATA = Path(__file__).resolve().parents[2] / "data" / "vllm"
# Labels whose values name the server, not the metric's meaning.
_SERVER_LABELS = {"model_name", "engine", "le"}


@dataclass(frozen=True, slots=True)
class FamilyShape:
    """What a scraper depends on in one family."""

    type: str
    label_names: frozenset[str]
    label_values: frozenset[tuple[tuple[str, str], ...]]
    bucket_bounds: tuple[float, ...]


def family_shapes(text: str) -> dict[str, FamilyShape]:
    shapes: dict[str, FamilyShape] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("vllm:"):
            continue
        samples = [s for s in family.samples if not s.name.endswith("_created")]
        names = frozenset(k for s in samples for k in s.labels if k != "le")
        is_info = family.name == "vllm:cache_config_info"
        values = frozenset(
            tuple(sorted((k, v) for k, v in s.labels.items() if k not in _SERVER_LABELS))
            for s in samples
            if not is_info
        )
        bounds = sorted({float(s.labels["le"]) for s in samples if s.name.endswith("_bucket")})
        shapes[family.name] = FamilyShape(family.type, names, values, tuple(bounds))
    return shapes


def shape_diff(real: dict[str, FamilyShape], emulated: dict[str, FamilyShape]) -> list[str]:
    """One line per difference, empty when the emulator serves what the real release does."""
    lines = [f"missing {name} ({real[name].type})" for name in sorted(set(real) - set(emulated))]
    lines += [f"extra {name}" for name in sorted(set(emulated) - set(real))]
    for name in sorted(set(real) & set(emulated)):
        r, e = real[name], emulated[name]
        if r.type != e.type:
            lines.append(f"{name}: type {e.type}, real {r.type}")
        if r.label_names != e.label_names:
            lines.append(
                f"{name}: labels missing {sorted(r.label_names - e.label_names)}, "
                f"extra {sorted(e.label_names - r.label_names)}"
            )
        elif r.label_values != e.label_values:
            lines.append(
                f"{name}: label values missing {sorted(r.label_values - e.label_values)}, "
                f"extra {sorted(e.label_values - r.label_values)}"
            )
        if r.bucket_bounds != e.bucket_bounds:
            lines.append(f"{name}: buckets {e.bucket_bounds}, real {r.bucket_bounds}")
    return lines


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
    real = family_shapes((DATA / "metrics-0.32.0.txt").read_text(encoding="utf-8"))
    assert shape_diff(real, family_shapes(emulated_metrics)) == []


@pytest.mark.parametrize("emulated_metrics", ["0.33.0"], indirect=True)
def test_0_33_serves_what_0_32_does_plus_one_cache_config_field(emulated_metrics: str) -> None:
    # vLLM 0.33.0's wheel has the same v1/metrics/loggers.py and perf.py as 0.32.0; its
    # CacheConfig gained simple_cpu_offload_num_blocks.
    real = family_shapes((DATA / "metrics-0.32.0.txt").read_text(encoding="utf-8"))
    info = real["vllm:cache_config_info"]
    real["vllm:cache_config_info"] = FamilyShape(
        info.type,
        info.label_names | {"simple_cpu_offload_num_blocks"},
        info.label_values,
        info.bucket_bounds,
    )
    assert shape_diff(real, family_shapes(emulated_metrics)) == []
