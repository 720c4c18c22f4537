"""Build the agent from its configuration and run it (what ``slotune agent`` calls)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from slotune.collector.agent.encode import DEFAULT_HEARTBEAT_S
from slotune.collector.agent.export_otel import OtlpExporter
from slotune.collector.agent.export_prom import PrometheusExporter
from slotune.collector.agent.loop import Agent, Exporter, ScrapeOutcome
from slotune.collector.agent.remote_write import RemoteWriter
from slotune.collector.agent.spool import Spool
from slotune.collector.agent.targets import (
    DEFAULT_INTERVAL_S,
    TargetSpec,
    check_unique,
    load_targets_file,
    parse_target_arg,
)
from slotune.collector.agent.writer import StoreWriter
from slotune.collector.errors import ConfigError


def default_spool_dir() -> Path:
    """``<user data dir>/slotune/spool``."""
    return Path(platformdirs.user_data_dir("slotune")) / "spool"


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Everything ``slotune agent`` was told.

    Attributes:
        target_args: ``KIND=URL`` strings.
        targets_file: a targets YAML file.
        interval_s: default scrape interval.
        db_url: store URL (None: default SQLite file).
        node: node name ("": this host's name).
        prometheus_port: serve the Prometheus endpoint on this port (None: no endpoint).
        prometheus_host: address the endpoint binds.
        otlp_endpoint: push OTLP metrics there (None: no OTLP).
        otlp_protocol: ``http`` or ``grpc``.
        spool_dir: where batches wait while the store is unreachable.
        scrape_timeout_s: default limit for one scrape of a target, fetch and parse (cut to
            a shorter interval); None: 10 s or the interval if that is less.
        heartbeat_s: longest time an unchanged cumulative series goes unwritten (0: every
            sample of every scrape is written).
        remote_write_url: send the samples to this remote-write receiver instead of the
            store (None: the store).
        remote_write_headers: headers of every remote-write request (credentials, tenant).
    """

    target_args: tuple[str, ...] = ()
    targets_file: Path | None = None
    interval_s: float = DEFAULT_INTERVAL_S
    db_url: str | None = None
    node: str = ""
    prometheus_port: int | None = None
    prometheus_host: str = "127.0.0.1"
    otlp_endpoint: str | None = None
    otlp_protocol: str = "http"
    spool_dir: Path | None = None
    scrape_timeout_s: float | None = None
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    remote_write_url: str | None = None
    remote_write_headers: tuple[tuple[str, str], ...] = ()


def resolve_targets(config: AgentConfig) -> list[TargetSpec]:
    """The targets of the command line and the targets file, names checked unique."""
    node = config.node or socket.gethostname()
    interval_s, timeout_s = config.interval_s, config.scrape_timeout_s
    targets = [
        parse_target_arg(a, interval_s=interval_s, scrape_timeout_s=timeout_s, node=node)
        for a in config.target_args
    ]
    if config.targets_file is not None:
        targets += load_targets_file(
            config.targets_file, node=node, interval_s=interval_s, scrape_timeout_s=timeout_s
        )
    if not targets:
        raise ConfigError(
            "no targets: pass --scrape KIND=URL (e.g. vllm=http://127.0.0.1:8000)"
            " or --targets FILE.yaml"
        )
    check_unique(targets)
    return targets


def build_agent(config: AgentConfig) -> Agent:
    """An agent with its writer, spool and exporters (servers already listening)."""
    targets = resolve_targets(config)
    spool_dir = config.spool_dir or default_spool_dir()
    writer: StoreWriter
    if config.remote_write_url:
        # one batch a segment: a replay cut short by a new outage resends no batch twice
        spool = Spool(spool_dir / "remote-write", segment_bytes=1)
        writer = RemoteWriter(config.remote_write_url, spool, dict(config.remote_write_headers))
    else:
        writer = StoreWriter(config.db_url, Spool(spool_dir))
    exporters: list[Exporter] = []
    if config.otlp_endpoint:
        exporters.append(
            OtlpExporter(
                config.otlp_endpoint, config.otlp_protocol, node=config.node or socket.gethostname()
            )
        )
    if config.prometheus_port is not None:
        exporters.append(PrometheusExporter(config.prometheus_host, config.prometheus_port))
    return Agent(targets, writer, exporters, heartbeat_s=config.heartbeat_s)


def run_agent(
    config: AgentConfig, *, once: bool = False, duration_s: float | None = None
) -> list[ScrapeOutcome]:
    """Run the agent until interrupted (or ``duration_s``), or scrape once with ``once``.

    Returns:
        The outcomes of the single scrape with ``once``; empty otherwise.
    """
    agent = build_agent(config)
    try:
        if once:
            return asyncio.run(agent.scrape_all_once())
        asyncio.run(_run_until_terminated(agent, duration_s))
        return []
    finally:
        agent.close()


async def _run_until_terminated(agent: Agent, duration_s: float | None) -> None:
    """Run; SIGTERM (``docker stop``, systemd) stops like Ctrl-C: scrapes finish, queue flushed."""
    task = asyncio.current_task()
    assert task is not None  # called by asyncio.run
    with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows loops
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await agent.run(duration_s=duration_s)
