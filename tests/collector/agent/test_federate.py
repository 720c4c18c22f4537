"""``--scrape prometheus=URL``: the agent reads engines through a real Prometheus' /federate."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _tools import free_port, require_binary
from agent_helpers import MetricsServer, Routes, vllm_exposition
from typer.testing import CliRunner

from slotune.collector.agent.federate import federate_url
from slotune.collector.store import latest_value, list_targets, open_store
from slotune.ui.cli import app

DCGM = (
    "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
    'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-1"} 71\n'
    "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
    'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-1"} 40960\n'
)
OTHER = "# TYPE node_load1 gauge\nnode_load1 0.5\n"


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], str]]:
    """Factory: a real Prometheus scraping ``{job: host:port}`` every second."""
    binary = require_binary("prometheus", "prometheus")
    procs: list[subprocess.Popen[bytes]] = []

    def start(jobs: dict[str, str]) -> str:
        port = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s}\nscrape_configs:\n"
            + "".join(
                f"  - job_name: {job}\n    static_configs: [{{targets: ['{address}']}}]\n"
                for job, address in jobs.items()
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        return f"http://127.0.0.1:{port}"

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=20)


def wait_for_jobs(prom: str, jobs: tuple[str, ...], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(federate_url(prom + "/federate"), timeout=5) as r:
                body = r.read().decode()
            if all(f'job="{job}"' in body for job in jobs):
                return
        except OSError:
            pass  # Prometheus still starting
        time.sleep(0.5)
    raise AssertionError(f"Prometheus did not scrape {jobs} within {timeout_s} s")


@pytest.mark.prometheus
@pytest.mark.slow
def test_each_federated_job_and_instance_becomes_a_target(
    agent_db: str,
    metrics_server: Callable[[Routes], MetricsServer],
    prometheus: Callable[[dict[str, str]], str],
) -> None:
    engine = metrics_server(
        {"/metrics": lambda: vllm_exposition([3, 5, 2, 0, 0, 0, 1], kv_usage=0.25)}
    )
    dcgm = metrics_server({"/metrics": lambda: DCGM})
    node = metrics_server({"/metrics": lambda: OTHER})
    hosts = {
        name: s.url.removeprefix("http://").rstrip("/")
        for name, s in (("vllm", engine), ("dcgm", dcgm), ("node", node))
    }
    prom = prometheus(hosts)
    wait_for_jobs(prom, ("vllm", "dcgm"))

    result = CliRunner().invoke(
        app, ["--db", agent_db, "agent", "--scrape", f"prometheus={prom}", "--once", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    (outcome,) = json.loads(result.stdout)
    assert outcome["is_up"] and outcome["num_samples"] > 0

    with open_store(agent_db) as store:
        targets = {t.name: t for t in list_targets(store)}
        engine_target = f"vllm/{hosts['vllm']}"
        dcgm_target = f"dcgm/{hosts['dcgm']}"
        # the node exporter's series are not engine series: left out by the default match[]
        assert set(targets) == {engine_target, dcgm_target, f"prometheus@{prom[7:]}"}
        assert targets[engine_target].kind == "vllm"
        assert targets[engine_target].labels["instance"] == hosts["vllm"]
        assert targets[dcgm_target].kind == "dcgm"
        # canonical names, through each kind's own mapping
        assert latest_value(store, engine_target, "kv_usage") == 0.25
        assert latest_value(store, engine_target, "ttft_bucket", {"le": "+Inf"}) == 11
        assert latest_value(store, dcgm_target, "temperature_celsius") == 71
        assert latest_value(store, dcgm_target, "vram_used") == 40960 * 2**20
