"""``slotune agent --remote-write``: a real VictoriaMetrics receives the scrapes; stopped in
the middle of the run and started again, it ends up with every sample exactly once, and the
metrics contract reads them back."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import cramjam
import httpx
import pytest
from _tools import SLOTUNE, free_port, require_binary
from agent_helpers import MetricsServer

from slotune.collector.agent.remote_write import RemoteWriter, encode, parse_headers
from slotune.collector.agent.spool import Spool
from slotune.collector.errors import ConfigError
from slotune.collector.metrics import PromClient, PromMetrics
from slotune.collector.store import SampleIn

COUNTER = "vllm:request_success_total"
WAIT_S = 120.0


class Receiver:
    """VictoriaMetrics on loopback over one data directory, stopped and started at will."""

    def __init__(self, data: Path) -> None:
        self.binary = require_binary("victoria-metrics", "victoria-metrics")
        self.data = data
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.binary,
                f"-storageDataPath={self.data}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=100y",
                "-search.latencyOffset=0s",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait(lambda: _get(self.url + "/health") == "OK", "VictoriaMetrics did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
            self.proc = None

    def samples(self, name: str) -> list[tuple[int, float]]:
        """(timestamp ms, value) of every stored sample of ``name``, as stored."""
        _get(self.url + "/internal/force_flush")
        body = _get(f"{self.url}/api/v1/export?match[]={name}")
        out: list[tuple[int, float]] = []
        for line in body.splitlines():
            row = json.loads(line)
            out.extend(zip(row["timestamps"], row["values"], strict=True))
        return sorted(out)


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return str(r.read().decode())
    except OSError:
        return ""


def _wait(ready: object, message: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(message)
        time.sleep(0.2)


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    r = Receiver(tmp_path / "vm")
    r.start()
    yield r
    r.stop()


@pytest.mark.slow
def test_no_sample_is_lost_or_duplicated_across_an_outage(
    receiver: Receiver, tmp_path: Path
) -> None:
    scrapes = 0

    def exposition() -> str:
        nonlocal scrapes
        scrapes += 1  # one more finished request per scrape: values 1, 2, 3 ... with no gap
        return (
            f"# TYPE {COUNTER} counter\n"
            f'{COUNTER}{{model_name="m",finished_reason="stop"}} {scrapes}\n'
        )

    engine = MetricsServer({"/metrics": exposition}).start()
    agent = subprocess.Popen(
        [
            SLOTUNE,
            "--db",
            f"sqlite:///{tmp_path / 'unused.db'}",
            "agent",
            "--scrape",
            f"vllm={engine.url}",
            "--interval",
            "0.5s",
            "--heartbeat",
            "0s",
            "--spool-dir",
            str(tmp_path / "spool"),
            "--remote-write",
            receiver.url + "/api/v1/write",
            "--remote-write-header",
            "Authorization=Bearer s3cret",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait(lambda: len(receiver.samples(COUNTER)) >= 4, "no sample reached the receiver")
        receiver.stop()  # the outage: the agent retries, then spools
        down_at = scrapes
        _wait(lambda: scrapes >= down_at + 10, "the agent stopped scraping")
        receiver.start()
        back_at = scrapes
        _wait(lambda: scrapes >= back_at + 4, "the agent stopped scraping")
    finally:
        agent.send_signal(signal.SIGTERM)
        _, err = agent.communicate(timeout=120)
        engine.stop()
    assert agent.returncode == 0, err.decode()
    assert b"s3cret" not in err
    stored = receiver.samples(COUNTER)
    values = [v for _, v in stored]
    stamps = [t for t, _ in stored]
    assert values == [float(i) for i in range(1, len(values) + 1)]  # none lost, none twice
    assert len(set(stamps)) == len(stamps)
    assert len(values) >= back_at + 4 - 1  # the outage's scrapes are all there
    # the metrics contract reads them back: the target is job/instance
    client = PromClient(receiver.url)
    with contextlib.closing(client):
        (target,) = PromMetrics(client).targets(time.time())
        assert target.name.startswith("slotune/") and target.kind == "vllm"


def test_a_write_request_is_snappy_protobuf() -> None:
    body = encode([SampleIn("t", "up", "gauge", {"a": "b"}, 1.5, 1.0)])
    raw = bytes(cramjam.snappy.decompress_raw(body))
    for part in (b"__name__", b"up", b"job", b"slotune", b"instance", b"t", b"a", b"b"):
        assert part in raw


def test_a_refused_batch_is_quarantined_and_a_failing_receiver_spooled(tmp_path: Path) -> None:
    replies = iter([400, 503, 503, 503, 503])

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(next(replies), text="out of order")

    spool = Spool(tmp_path / "spool", segment_bytes=1)
    writer = RemoteWriter(
        "http://u:pw@receiver/api/v1/write",
        spool,
        sleep=lambda s: None,
        transport=httpx.MockTransport(answer),
    )
    batch = [SampleIn("t", "up", "gauge", {}, 1.0, 1.0)]
    writer.write_now(batch)
    assert spool.stats().num_rejected_samples == 1
    writer.write_now(batch)
    assert spool.stats().num_segments == 1 and writer.stats().num_spooled == 1
    writer.close()


def test_a_header_needs_a_name_and_never_shows_its_value() -> None:
    assert parse_headers(["X-Scope-OrgID=team-a"]) == {"X-Scope-OrgID": "team-a"}
    with pytest.raises(ConfigError) as e:
        parse_headers(["Bearer s3cret"])
    assert "s3cret" not in str(e.value) or "NAME=VALUE" in str(e.value)
