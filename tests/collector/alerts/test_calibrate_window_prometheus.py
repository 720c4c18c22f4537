"""``sim calibrate --target --window`` read in place from a real Prometheus (``--metrics``)
and from the store, both holding the same window of traffic: the same figures, the same
fit, and the same refusal of a window with too few requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _window_traffic import (
    BASE_TS,
    GPU,
    HIDDEN,
    MODEL,
    TARGET,
    end_ts,
    fill_store,
    served,
    write_openmetrics,
)
from prometheus_server import backfill, serving
from typer.testing import CliRunner, Result

from slotune.collector.store import Store
from slotune.tuner.sim.catalog import CATALOG_ENV, _loader
from slotune.ui.cli import app


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Overlays loaded here must not leak into other tests' catalog."""
    monkeypatch.setattr(_loader, "_registry", None)
    monkeypatch.delenv(CATALOG_ENV, raising=False)


@pytest.fixture(scope="module")
def traffic() -> list[dict[str, Any]]:
    return served(HIDDEN, 300, 1.0)


@pytest.fixture(scope="module")
def prometheus_url(
    traffic: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A real Prometheus on loopback holding the traffic."""
    root = tmp_path_factory.mktemp("prom")
    write_openmetrics(root / "traffic.om", traffic)
    backfill(root / "traffic.om", root / "tsdb")
    with serving(root / "tsdb") as url:
        yield url


def _calibrate(db_url: str, metrics: str | None, *args: str) -> Result:
    root = ["--db", db_url] + ([] if metrics is None else ["--metrics", metrics])
    command = ["sim", "--model", MODEL, "--gpu", GPU, "calibrate", "--target", TARGET]
    return CliRunner().invoke(app, [*root, *command, *args])


@pytest.mark.prometheus
@pytest.mark.slow
def test_the_window_reads_and_fits_the_same_from_both(
    store: Store, store_url: str, prometheus_url: str, traffic: list[dict[str, Any]], tmp_path: Path
) -> None:
    fill_store(store, traffic)
    end = end_ts(traffic)
    # from before the first scrape (all zero) to the last, so neither path extrapolates
    window = ["--window", f"{end - BASE_TS + 60:.0f}s", "--end", f"{end:.0f}", "--json"]
    got = {}
    for name, metrics in (("sql", None), ("prom", prometheus_url)):
        out = tmp_path / f"{name}.yaml"
        result = _calibrate(store_url, metrics, *window, "--out", str(out))
        assert result.exit_code == 0, result.output
        got[name] = json.loads(result.stdout)
        assert out.is_file()
    sql, prom = got["sql"], got["prom"]
    assert prom["window"]["model"] == MODEL
    for key in ("num_requests", "mean_prompt_tokens", "mean_output_tokens", "mean_ttft_s"):
        assert prom["window"][key] == pytest.approx(sql["window"][key], rel=1e-6), key
    assert prom["window"]["rate_per_s"] == pytest.approx(sql["window"]["rate_per_s"], rel=1e-6)
    assert prom["measured_s"] == pytest.approx(sql["measured_s"], rel=1e-6)
    assert prom["step_terms"]["terms"] == pytest.approx(sql["step_terms"]["terms"], rel=1e-3)
    for data in (sql, prom):
        before, after = data["error_before"]["judged"], data["error_after"]["judged"]
        assert after["score"] < 1.0 < before["score"] and data["beats_prior"] is True


@pytest.mark.prometheus
@pytest.mark.slow
def test_a_window_with_too_few_requests_is_refused_by_both(
    store: Store, store_url: str, prometheus_url: str, traffic: list[dict[str, Any]], tmp_path: Path
) -> None:
    fill_store(store, traffic)
    window = ["--window", "60s", "--end", f"{BASE_TS + 60:.0f}", "--out", str(tmp_path / "o.yaml")]
    for metrics in (None, prometheus_url):
        result = _calibrate(store_url, metrics, *window)
        assert result.exit_code == 1, result.output
        assert "finished requests; at least 50 are needed" in result.output
        assert not (tmp_path / "o.yaml").exists()
