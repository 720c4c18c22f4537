"""``slotune agent --once``, ``slotune metrics summary``, ``slotune targets list``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from agent_helpers import MetricsServer, Routes, data_text, models_json, vllm_exposition
from typer.testing import CliRunner

from slotune.collector.agent import scrape_snapshot
from slotune.collector.errors import ConfigError, SourceError
from slotune.ui.cli import app

Server = Callable[[Routes], MetricsServer]


def slotune(db: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--db", db, *args])
    return result.exit_code, result.stdout, result.stderr


def test_agent_once_then_summary_and_targets(
    agent_db: str, tmp_path: Path, metrics_server: Server
) -> None:
    engine = metrics_server(
        {
            "/metrics": lambda: vllm_exposition([1, 2, 0, 0, 0, 0, 0], waiting=4, kv_usage=0.5),
            "/v1/models": lambda: models_json("llama"),
        }
    )
    dcgm = metrics_server(
        {"/metrics": lambda: data_text("dcgm_exporter_tesla_t4_prof_excerpt.prom")}
    )
    targets = tmp_path / "targets.yaml"
    targets.write_text(
        f"targets:\n  - {{kind: dcgm, url: '{dcgm.url}', name: gpus, labels: {{pool: chat}}}}\n"
    )
    code, out, err = slotune(
        agent_db,
        "agent",
        "--scrape",
        f"vllm={engine.url}",
        "--scrape",
        "nvml=fake",
        "--targets",
        str(targets),
        "--once",
        "--node",
        "gpu-1",
        "--spool-dir",
        str(tmp_path / "spool"),
        "--json",
    )
    assert code == 0, err
    outcomes = {o["target"]: o for o in json.loads(out)}
    assert set(outcomes) == {f"vllm@{engine.url[7:]}", "nvml@gpu-1", "gpus"}
    assert all(o["is_up"] for o in outcomes.values())

    code, out, _ = slotune(agent_db, "targets", "list", "--json")
    listed = {t["name"]: t for t in json.loads(out)}
    assert listed[f"vllm@{engine.url[7:]}"]["model"] == "llama"
    assert listed["gpus"]["pool"] == "chat" and listed["gpus"]["node"] == "gpu-1"

    code, out, _ = slotune(agent_db, "metrics", "summary", "--window", "1m", "--json")
    by_target = {s["target"]: s for s in json.loads(out)}
    engine_summary = by_target[f"vllm@{engine.url[7:]}"]
    assert engine_summary["requests_waiting"] == 4.0 and engine_summary["kv_usage"] == 0.5
    gpu = by_target["nvml@gpu-1"]
    assert gpu["vram_used_bytes"] == 76_000_000_000 and gpu["power_watts"] == 512.0
    assert by_target["gpus"]["vram_used_bytes"] == 5120 * 1024 * 1024

    code, out, _ = slotune(agent_db, "metrics", "summary", "--target", "gpus")
    assert code == 0 and "gpus" in out
    code, _, err = slotune(agent_db, "metrics", "summary", "--target", "nope")
    assert code == 1 and "no target named 'nope'" in err


def test_agent_without_targets_says_how_to_give_one(agent_db: str) -> None:
    code, _, err = slotune(agent_db, "agent", "--once")
    assert code == 1 and "--scrape KIND=URL" in err


def test_scrape_snapshot_for_the_tuner(metrics_server: Server) -> None:
    text = data_text("vllm_v1_design_doc_example.prom") + (
        "# TYPE vllm:prefix_cache_queries_total counter\n"
        "vllm:prefix_cache_queries_total 200\n"
        "# TYPE vllm:prefix_cache_hits_total counter\n"
        "vllm:prefix_cache_hits_total 50\n"
        "# TYPE vllm:num_preemptions_total counter\n"
        "vllm:num_preemptions_total 3\n"
        "vllm:kv_cache_usage_perc 0.75\n"
    )
    engine = metrics_server({"/metrics": lambda: text})
    snap = scrape_snapshot("vllm", engine.url)
    assert (snap.prefix_hit_rate, snap.preemptions, snap.kv_usage) == (0.25, 3.0, 0.75)
    assert snap.histograms["ttft"].count == 140.0
    assert snap.histograms["ttft"].quantile(0.5) == pytest.approx(0.02 + 0.02 * (70 - 13) / 84)
    assert snap.num_skipped_lines == 4
    with pytest.raises(SourceError, match="is unreachable"):
        scrape_snapshot("vllm", "http://127.0.0.1:9", timeout_s=1.0)
    with pytest.raises(ConfigError, match="unknown engine kind"):
        scrape_snapshot("tgi", engine.url)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scrape", "vllm=http://[/x]"], "target URL 'http://[/x]' is not a URL"),
        (["--scrape", "vllm=[/x]"], "target URL '[/x]' must look like"),
        (["--scrape", "vllm=http://127.0.0.1:1", "--spool-dir", "{file}"], "--spool-dir"),
        (["--scrape", "vllm=http://127.0.0.1:1", "--prometheus-port", "{busy}"], "cannot listen"),
    ],
)
def test_bad_agent_input_is_one_line(
    agent_db: str, tmp_path: Path, args: list[str], message: str
) -> None:
    import socket

    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        filled = [a.format(file=a_file, busy=port) for a in args]
        code, _out, err = slotune(agent_db, "agent", "--once", *filled)
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


def test_credentials_in_a_target_url_are_neither_printed_nor_stored(
    agent_db: str, metrics_server: Server
) -> None:
    engine = metrics_server({"/metrics": lambda: vllm_exposition([1, 0, 0, 0, 0, 0, 0])})
    host = engine.url.removeprefix("http://")
    url = f"http://scraper:S3CRET@{host}/metrics?token=T0KEN"
    code, out, err = slotune(agent_db, "agent", "--once", "--json", "--scrape", f"vllm={url}")
    assert code == 0, err
    code, listed, err = slotune(agent_db, "targets", "list", "--json")
    assert code == 0, err
    for text in (out, listed):
        assert "S3CRET" not in text and "T0KEN" not in text
    assert f"scraper:***@{host}/metrics?token=***" in listed
    assert f"vllm@{host}" in listed


def test_user_text_in_tables_is_printed_not_read_as_markup(agent_db: str) -> None:
    url = "http://127.0.0.1:1/[/x]"
    code, _, err = slotune(agent_db, "agent", "--once", "--scrape", f"vllm={url}")
    assert code == 0, err
    code, _, err = slotune(agent_db, "targets", "list")
    assert code == 0, err
    code, _, err = slotune(agent_db, "metrics", "summary")
    assert code == 0, err


@pytest.mark.parametrize(
    ("timeout", "message"),
    [("0s", "must be more than 0"), ("soon", "--scrape-timeout: 'soon' is not a duration")],
)
def test_agent_refuses_a_bad_scrape_timeout_in_one_line(
    agent_db: str, timeout: str, message: str
) -> None:
    code, _, err = slotune(
        agent_db, "agent", "--scrape", "nvml=fake", "--once", "--scrape-timeout", timeout
    )
    assert code != 0 and message in err and "Traceback" not in err
