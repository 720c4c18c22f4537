"""Runs stored with their records (SQLite and PostgreSQL), compared and listed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from bench_fakes import FakeEngine, Mode

from slotune.collector.bench import ArrivalSpec, BenchConfig, run_benchmark, save_run
from slotune.collector.bench.compare import compare_summaries
from slotune.collector.bench.persist import check_store, list_runs, resolve_run
from slotune.collector.errors import ConfigError, StoreError
from slotune.collector.slo import parse_slos
from slotune.collector.store import load_bench_run, open_store, upgrade


def test_a_run_round_trips_through_the_store(
    fake_engine: Callable[..., FakeEngine], store_url: str
) -> None:
    engine = fake_engine(mode_of=lambda rid: Mode.HTTP_500 if rid == "req-2" else Mode.OK)
    config = BenchConfig(
        url=engine.url,
        arrival=ArrivalSpec.from_rate(100.0),
        input_len="10",
        output_len="4",
        num_requests=5,
        api_key="sk-zz",
        slos=tuple(parse_slos(["ttft:p99<=1s"])),
    )
    result = run_benchmark(config)
    upgrade(store_url)
    with open_store(store_url) as store:
        run_id = save_run(store, result, name="baseline")
        loaded = load_bench_run(store, run_id)
    assert loaded.meta.name == "baseline" and loaded.meta.model == "fake-model"
    assert list(loaded.records) == list(result.records)
    assert loaded.summary == json.loads(json.dumps(result.summary.to_dict()))
    assert "sk-zz" not in json.dumps(dict(loaded.meta.config))
    assert loaded.meta.config["wall_offset_s"] == pytest.approx(result.wall_offset_s)
    infos = list_runs(store_url)
    assert [i.run_id for i in infos] == [run_id]
    ref = resolve_run(store_url, str(run_id))
    assert ref.label == f"#{run_id} baseline"


def test_compare_a_stored_run_with_a_saved_file(
    fake_engine: Callable[..., FakeEngine], sqlite_url: str, tmp_path: Path
) -> None:
    engine = fake_engine()
    config = BenchConfig(
        url=engine.url,
        arrival=ArrivalSpec.from_rate(100.0),
        input_len="10",
        output_len="4",
        num_requests=4,
    )
    upgrade(sqlite_url)
    a = run_benchmark(config)
    run_id = save_run(sqlite_url, a, "a")
    saved = tmp_path / "b.json"
    b = run_benchmark(config)
    saved.write_text(json.dumps(b.to_dict(with_records=True)))
    ref_a, ref_b = resolve_run(sqlite_url, str(run_id)), resolve_run(sqlite_url, str(saved))
    rows = {r.metric: r for r in compare_summaries(ref_a.summary, ref_b.summary)}
    assert rows["num_completed"].a == rows["num_completed"].b == 4
    assert rows["num_completed"].change == 0.0
    assert rows["ttft_ms.p50"].a == pytest.approx(a.summary.ttft_ms.percentiles[50.0])


def test_unknown_runs_and_unusable_stores_are_clear_errors(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    with pytest.raises(ConfigError, match="no benchmark run with id 99"):
        resolve_run(sqlite_url, "99")
    with pytest.raises(ConfigError, match="neither a run id"):
        resolve_run(sqlite_url, "baseline")
    bad = tmp_path / "x.json"
    bad.write_text("[]")
    with pytest.raises(ConfigError, match="has no 'summary'"):
        resolve_run(sqlite_url, str(bad))
    with pytest.raises(StoreError):
        check_store(f"sqlite:///{tmp_path / 'never-upgraded.db'}")


@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary", b"[" * 100_000, b'{"summary": 1}'])
def test_compare_refuses_a_file_that_is_not_a_saved_run(
    tmp_path: Path, sqlite_url: str, content: bytes
) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=r"run\.json: "):
        resolve_run(sqlite_url, str(path))
