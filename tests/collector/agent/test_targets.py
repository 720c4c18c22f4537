"""--scrape arguments and targets YAML files."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotune.collector.agent.base import SourceKind
from slotune.collector.agent.targets import load_targets_file, parse_target_arg
from slotune.collector.errors import ConfigError


def test_base_url_gets_each_kinds_known_paths() -> None:
    t = parse_target_arg("vllm=http://127.0.0.1:8000", node="n1")
    assert t.metrics_urls == ("http://127.0.0.1:8000/metrics",)
    assert (t.name, t.kind, t.labels["node"]) == ("vllm@127.0.0.1:8000", SourceKind.VLLM, "n1")
    trt = parse_target_arg("trtllm=http://h:8000/", node="n1")
    assert trt.metrics_urls == ("http://h:8000/metrics", "http://h:8000/prometheus/metrics")


def test_explicit_path_is_used_as_given() -> None:
    t = parse_target_arg("dcgm=http://h:9400/custom/metrics", node="n1")
    assert t.metrics_urls == ("http://h:9400/custom/metrics",)
    assert t.base_url == "http://h:9400"


def test_nvml_needs_no_url() -> None:
    t = parse_target_arg("nvml", node="gpu-7")
    assert (t.name, t.metrics_urls) == ("nvml@gpu-7", ())


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("tgi=http://h:1", "unknown target kind 'tgi'"),
        ("vllm", "write KIND=URL"),
        ("vllm=localhost:8000", "must look like http://host:port"),
    ],
)
def test_bad_target_args_name_the_fix(arg: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_target_arg(arg, node="n")


def test_yaml_file_with_labels_and_intervals(tmp_path: Path) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text(
        "interval: 10s\n"
        "labels: {pool: chat}\n"
        "targets:\n"
        "  - {kind: vllm, url: 'http://10.0.0.5:8000', name: llama-a, interval: 2s,\n"
        "     labels: {node: gpu-1, model: llama}}\n"
        "  - {kind: dcgm, url: 'http://10.0.0.5:9400'}\n"
        "  - {kind: nvml, url: fake}\n"
    )
    a, b, c = load_targets_file(path, node="here")
    assert (a.name, a.interval_s, dict(a.labels)) == (
        "llama-a",
        2.0,
        {"node": "gpu-1", "pool": "chat", "model": "llama"},
    )
    assert (b.interval_s, b.labels["node"], b.labels["pool"]) == (10.0, "here", "chat")
    assert (c.kind, c.url) == (SourceKind.NVML, "fake")


def test_command_line_interval_is_the_default_of_a_file_without_one(tmp_path: Path) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text(
        "targets:\n  - {kind: nvml}\n  - {kind: dcgm, url: 'http://h:1', interval: 3s}\n"
    )
    a, b = load_targets_file(path, node="n", interval_s=1.0)
    assert (a.interval_s, b.interval_s) == (1.0, 3.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("targets: 3\n", "must be a mapping with a 'targets' list"),
        ("targets:\n  - {url: 'http://h:1'}\n", r"targets\[0\] must be a mapping with at least"),
        ("targets:\n  - {kind: vllm}\n", "'url' is required"),
        ("targets:\n  - {kind: vllm, url: 'http://h:1', interval: soon}\n", "not a duration"),
        (
            "targets:\n  - {kind: vllm, url: 'http://h:1'}\n  - {kind: vllm, url: 'http://h:1'}\n",
            "two targets are named",
        ),
    ],
)
def test_bad_yaml_names_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_targets_file(path, node="n")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"targets:\n  - \xff\xfe\x00\x01", "is not UTF-8 text"),
        (b"[" * 100_000, "nests deeper"),
    ],
)
def test_binary_and_deep_targets_files_are_one_line(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "targets.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_targets_file(path, node="n")


def test_scrape_timeout_defaults_to_ten_seconds_or_the_interval() -> None:
    assert parse_target_arg("nvml", node="n", interval_s=30.0).scrape_timeout_s == 10.0
    assert parse_target_arg("nvml", node="n", interval_s=2.0).scrape_timeout_s == 2.0
    cut = parse_target_arg("nvml", node="n", interval_s=2.0, scrape_timeout_s=5.0)
    assert cut.scrape_timeout_s == 2.0  # an inherited --scrape-timeout is cut to the interval


def test_scrape_timeout_and_body_size_limit_in_a_targets_file(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "interval: 10s\nscrape_timeout: 4s\nbody_size_limit: 1MB\n"
        "targets:\n"
        "  - {kind: dcgm, url: 'http://h:1'}\n"
        "  - {kind: dcgm, url: 'http://h:2', interval: 2s}\n"
        "  - {kind: dcgm, url: 'http://h:3', scrape_timeout: 9s, body_size_limit: 512KiB}\n"
    )
    a, b, c = load_targets_file(path, node="n", scrape_timeout_s=1.0)
    assert (a.scrape_timeout_s, a.max_body_bytes) == (4.0, 1 << 20)
    assert b.scrape_timeout_s == 2.0
    assert (c.scrape_timeout_s, c.max_body_bytes) == (9.0, 512 << 10)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("interval: 2s, scrape_timeout: 3s", r"scrape_timeout 3 s must be .* at most the interval"),
        ("scrape_timeout: 0s", "must be more than 0"),
        ("scrape_timeout: soon", "not a duration"),
        ("body_size_limit: lots", r"'lots' is not a size"),
        ("body_size_limit: 0", "is not a size"),
        ("body_size_limit: 5TB", "is not a size"),
    ],
)
def test_bad_scrape_timeouts_and_body_size_limits_name_the_field(
    tmp_path: Path, entry: str, message: str
) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(f"targets:\n  - {{kind: vllm, url: 'http://h:1', {entry}}}\n")
    with pytest.raises(ConfigError, match=message):
        load_targets_file(path, node="n")
