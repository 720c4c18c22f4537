"""``slotune sim calibrate --target NAME --window D`` over the store's samples: a window of
traffic served on a GPU with hidden step terms is fitted and the overlay written; a window
the uncalibrated model already predicts writes nothing; bad windows and option mixes are
refused in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _window_traffic import BASE_TS, GPU, HIDDEN, MODEL, TARGET, end_ts, fill_store, served
from typer.testing import CliRunner, Result

from slotune.collector.errors import ConfigError
from slotune.collector.store import Store, open_store, register_target, upgrade
from slotune.tuner.sim.calibration import WindowCalibration, calibrate_window
from slotune.tuner.sim.catalog import CATALOG_ENV, Efficiency, _loader, get_gpu, load_catalog_file
from slotune.ui.cli import app

NUM_REQUESTS = 300
RATE = 1.0


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Overlays loaded here must not leak into other tests' catalog."""
    monkeypatch.setattr(_loader, "_registry", None)
    monkeypatch.delenv(CATALOG_ENV, raising=False)


@pytest.fixture(scope="module")
def hidden() -> list[dict[str, Any]]:
    return served(HIDDEN, NUM_REQUESTS, RATE)


@pytest.fixture(scope="module")
def uncalibrated() -> list[dict[str, Any]]:
    return served(Efficiency(), NUM_REQUESTS, RATE)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    upgrade(store_url)
    with open_store(store_url) as s:
        yield s


def _whole(lines: list[dict[str, Any]]) -> list[str]:
    """--window and --end that hold every request (and the scrape before the first)."""
    end = end_ts(lines)
    return ["--window", f"{end - BASE_TS + 60:.0f}s", "--end", f"{end:.0f}"]


def _calibrate(url: str, *args: str) -> Result:
    base = ["--db", url, "sim", "--model", MODEL, "--gpu", GPU, "calibrate"]
    return CliRunner().invoke(app, [*base, "--target", TARGET, *args])


def test_a_window_with_hidden_step_terms_is_fitted_and_written(
    store: Store, store_url: str, hidden: list[dict[str, Any]], tmp_path: Path
) -> None:
    fill_store(store, hidden)
    out = tmp_path / "overlay.yaml"
    result = _calibrate(store_url, *_whole(hidden), "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    window = data["window"]
    assert window["num_requests"] == NUM_REQUESTS and window["tpot_family"] == "tpot"
    mean_ttft = sum(d["ttft_ms"] for d in hidden) / len(hidden) / 1e3
    assert window["mean_ttft_s"] == pytest.approx(mean_ttft, rel=1e-6)
    before, after = data["error_before"]["judged"], data["error_after"]["judged"]
    assert after["score"] < 1.0 < before["score"] and data["beats_prior"] is True
    assert abs(after["ttft"]) < 0.20 and abs(after["tpot"]) < 0.10
    assert data["out"] == str(out)
    assert load_catalog_file(out)[0] == [GPU]
    step_terms = get_gpu(GPU).efficiency.step_terms
    assert step_terms.step_s == pytest.approx(data["step_terms"]["terms"]["step_s"])
    calibrated = yaml.safe_load(out.read_text("utf-8"))["gpus"][0]["calibrated"]
    assert calibrated["by"] == "slotune sim calibrate --target" and calibrated["beats_prior"]


def test_the_table_says_what_was_fitted(
    store: Store, store_url: str, hidden: list[dict[str, Any]], tmp_path: Path
) -> None:
    fill_store(store, hidden)
    result = _calibrate(store_url, *_whole(hidden))
    assert result.exit_code == 1 and "--out overlay.yaml is needed" in result.output
    result = _calibrate(store_url, *_whole(hidden), "--out", str(tmp_path / "overlay.yaml"))
    assert result.exit_code == 0, result.output
    assert f"from target {TARGET}" in result.output and "wrote " in result.output


def test_a_window_the_prior_already_predicts_writes_nothing(
    store: Store, store_url: str, uncalibrated: list[dict[str, Any]], tmp_path: Path
) -> None:
    fill_store(store, uncalibrated)
    out = tmp_path / "overlay.yaml"
    refused = _calibrate(store_url, *_whole(uncalibrated), "--out", str(out))
    assert refused.exit_code == 3, refused.output
    assert "nothing written (--force writes it)" in refused.output and not out.exists()
    forced = _calibrate(store_url, *_whole(uncalibrated), "--out", str(out), "--force")
    assert forced.exit_code == 4, forced.output
    assert yaml.safe_load(out.read_text("utf-8"))["gpus"][0]["calibrated"]["beats_prior"] is False


def test_an_engine_without_per_request_tpot_is_read_from_its_gaps(
    store: Store, hidden: list[dict[str, Any]]
) -> None:
    fill_store(store, hidden, leave_out=("vllm:request_time_per_output_token_seconds",))
    end = end_ts(hidden)
    report = _library(store, window_s=end - BASE_TS + 60, end_ts=end)
    assert report.traffic.tpot.family == "itl" and report.is_better
    gaps = sum(d["tpot_ms"] * (d["output_tokens"] - 1) for d in hidden if "tpot_ms" in d)
    num_gaps = sum(d["output_tokens"] - 1 for d in hidden)
    assert report.traffic.tpot_mean_s == pytest.approx(gaps / num_gaps / 1e3, rel=1e-6)
    assert abs(report.judged_after.tpot) < 0.10


def test_too_few_requests_says_how_many(store: Store, hidden: list[dict[str, Any]]) -> None:
    fill_store(store, hidden)
    with pytest.raises(ConfigError, match=r"holds \d+ finished requests; at least 50 are needed"):
        _library(store, window_s=30.0, end_ts=BASE_TS + 30.0)


def test_missing_histograms_are_named(store: Store, hidden: list[dict[str, Any]]) -> None:
    fill_store(store, hidden, leave_out=("vllm:request_prompt_tokens",))
    end = end_ts(hidden)
    with pytest.raises(ConfigError, match=r"no request_prompt_tokens histogram \(with its _sum\)"):
        _library(store, window_s=end - BASE_TS + 60, end_ts=end)


def test_an_unknown_target_is_refused(store: Store, hidden: list[dict[str, Any]]) -> None:
    fill_store(store, hidden)
    with pytest.raises(ConfigError, match=r"--target 'nope': no engine target .*vllm/127"):
        _library(store, target="nope")


def test_a_model_other_than_the_targets_is_refused(
    store: Store, hidden: list[dict[str, Any]]
) -> None:
    fill_store(store, hidden)
    register_target(store, TARGET, "vllm", "", {"model": "qwen3-8b"})
    with pytest.raises(ConfigError, match=r"serves 'qwen3-8b' .* calibrate with --model qwen3-8b"):
        _library(store)


def test_the_model_comes_from_the_targets_label(store: Store, hidden: list[dict[str, Any]]) -> None:
    fill_store(store, hidden)
    register_target(store, TARGET, "vllm", "", {"model": "meta-llama/Llama-3.1-8B-Instruct"})
    end = end_ts(hidden)
    outcome = calibrate_window(
        store,
        None,
        TARGET,
        [],
        window_s=end - BASE_TS + 60,
        end_ts=end,
        engine="vllm",
        model=None,
        gpu=GPU,
        out=None,
    )
    assert outcome.report.config.model.id == MODEL and outcome.written is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--window", "30m", "--observed", "x.jsonl"], "leave out --observed"),
        (
            ["--window", "30m", "--run", "3", "--fit-fraction", "0.5"],
            "leave out --run, --fit-fraction",
        ),
        (["--end", "100"], "--target NAME and --window DURATION go together"),
        (["--window", "half an hour", "--json"], "--window: 'half an hour' is not a duration"),
        (["--window", "0s", "--json"], "--window must be positive"),
    ],
)
def test_bad_options_are_refused_in_one_line(
    sqlite_url: str, args: list[str], message: str
) -> None:
    upgrade(sqlite_url)
    result = _calibrate(sqlite_url, *args)
    assert result.exit_code == 1, result.output
    assert message in result.output and "Traceback" not in result.output


def _library(
    store: Store, *, target: str = TARGET, window_s: float = 3600.0, end_ts: float | None = None
) -> WindowCalibration:
    return calibrate_window(
        store,
        None,
        target,
        [],
        window_s=window_s,
        end_ts=BASE_TS + 3000.0 if end_ts is None else end_ts,
        engine="vllm",
        model=MODEL,
        gpu=GPU,
        out=None,
    ).report
