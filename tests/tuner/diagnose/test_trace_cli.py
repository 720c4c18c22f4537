"""``slotune diagnose trace`` end to end: JSON, HTML, the stored diagnosis, and bad input."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from trace_builder import TraceBuilder
from typer.testing import CliRunner

from slotune.collector.store import list_diagnoses, open_store, upgrade
from slotune.ui.cli import app

SHARED_TRACE = (
    Path(__file__).resolve().parents[2] / "data" / "gputraces" / "hta_alexnet_a100_trace.json.gz"
)


@pytest.fixture
def db(sqlite_url: str) -> str:
    upgrade(sqlite_url)
    return sqlite_url


def _stored(db: str) -> list[Mapping[str, Any]]:
    with open_store(db) as store:
        return [d.result for d in list_diagnoses(store, kind="trace")]


def test_json_html_and_stored(db: str, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    result = CliRunner().invoke(
        app, ["--db", db, "diagnose", "trace", str(SHARED_TRACE), "--json", "--html", str(html)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kind"] == "trace"
    assert data["overall"]["exposed_memcpy_ms"] == pytest.approx(55.503)
    codes = [f["code"] for f in data["findings"]]
    # 84 % of busy time is pageable HtoD copies; a 3 s first launch; the GPU idles 99 %.
    assert codes == ["transfer-bound", "warm-up-in-trace", "gpu-underused"]
    finding = data["findings"][2]
    assert finding["evidence"]["idle_share"] > 0.9
    assert finding["parameters"] and finding["remedy"]
    page = html.read_text()
    assert "<svg" in page and "gpu-underused" in page and "<script" not in page
    assert _stored(db) == [data]


def test_table_output(db: str) -> None:
    result = CliRunner().invoke(
        app, ["--db", db, "diagnose", "trace", str(SHARED_TRACE), "--top", "3"]
    )
    assert result.exit_code == 0, result.output
    assert "GPU time split" in result.output and "gpu-underused" in result.output


def _cpu_only(path: Path) -> None:
    path.write_text(
        json.dumps(
            {
                "schemaVersion": 1,
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::mm",
                        "pid": 1,
                        "tid": 1,
                        "ts": 0,
                        "dur": 5,
                    }
                ],
            }
        )
    )


def _no_correlation(path: Path) -> None:
    t = TraceBuilder()
    t.gpu(0, 10)
    t.write(path)


def _unknown_version(path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 1, [(2, 3)])
    t.write(path, schema_version=7)


def _truncated(path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 1, [(2, 3)])
    text = json.dumps(t.document(), indent=1)
    path.write_text(text[: len(text) // 2])


def _truncated_gzip(path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 1, [(2, 3)])
    data = gzip.compress(json.dumps(t.document()).encode())
    path.write_bytes(data[: len(data) // 2])


def _not_json(path: Path) -> None:
    path.write_text("ph,cat,name\nX,kernel,gemm\n")


def _bare_array(path: Path) -> None:
    path.write_text(json.dumps([{"ph": "X", "name": "aten::mm", "ts": 0, "dur": 1}]))


def _no_events(path: Path) -> None:
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": []}))


def _garbage_inside(path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 1, [(2, 3)])
    text = json.dumps(t.document(), indent=1).replace('"dur": 3', '"dur": three', 1)
    path.write_text(text)


@pytest.mark.parametrize(
    ("make", "name", "expected"),
    [
        (_cpu_only, "cpu.json", "no GPU events"),
        (_no_correlation, "nocorr.json", "no correlation ids"),
        (_unknown_version, "v7.json", "unknown profiler version (schemaVersion 7)"),
        (_truncated, "cut.json", "truncated"),
        (_truncated_gzip, "cut.json.gz", "truncated or corrupt gzip"),
        (_not_json, "trace.json", "not valid JSON"),
        (_bare_array, "old.json", "unknown profiler version"),
        (_no_events, "empty.json", "no 'traceEvents'"),
        (_garbage_inside, "bad.json", "not valid JSON at character"),
    ],
)
def test_bad_input_is_one_line_naming_the_file_and_nothing_is_stored(
    db: str,
    tmp_path: Path,
    make,
    name: str,
    expected: str,
) -> None:
    path = tmp_path / name
    make(path)
    result = CliRunner().invoke(app, ["--db", db, "diagnose", "trace", str(path), "--json"])
    assert result.exit_code == 1
    message = " ".join(result.output.split())
    assert message.startswith("error:") and name in message and expected in message, message
    assert "Traceback" not in result.output
    assert _stored(db) == []


def _run(tmp_path: Path, rank: int, start: float, world: int = 2) -> None:
    t = TraceBuilder(rank=rank, world_size=world)
    t.launch(start, 1, [(start + 2, 3)])
    t.write(tmp_path / f"r{rank}_{int(start)}_{world}.json")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ([(0, 0.0, 2), (0, 5.0, 2)], "are both rank 0"),
        ([(0, 0.0, 2), (1, 1e9, 2)], "were not recorded together"),
        ([(0, 0.0, 2), (1, 1.0, 4)], "world sizes [2, 4]"),
    ],
)
def test_directory_mixing_runs_is_refused(
    db: str, tmp_path: Path, files: list[tuple[int, float, int]], expected: str
) -> None:
    for rank, start, world in files:
        _run(tmp_path, rank, start, world)
    result = CliRunner().invoke(app, ["--db", db, "diagnose", "trace", str(tmp_path)])
    assert result.exit_code == 1
    message = " ".join(result.output.split())
    assert "mixes runs" in message and expected in message, message
    assert _stored(db) == []


def test_memset_option(db: str) -> None:
    runner = CliRunner()
    base = ["--db", db, "diagnose", "trace", str(SHARED_TRACE), "--no-store", "--json"]
    apart = json.loads(runner.invoke(app, [*base, "--memset", "separate"]).stdout)
    assert apart["memset"] == "separate"
    assert apart["overall"]["exposed_memset_ms"] == pytest.approx(0.008)
    bad = runner.invoke(app, [*base, "--memset", "apart"])
    assert bad.exit_code == 1 and "--memset 'apart': use compute or separate" in bad.output
    assert _stored(db) == []
