"""``slotune agent``: scrape engines and GPUs into the store (see docs/agent.md)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.markup import escape
from rich.table import Table

from slotune.ui.cli._common import JsonOption, console, db_url, print_json
from slotune.ui.cli._options import deprecated_alias

# Library modules are imported inside the command: building the CLI (every slotune run, shell
# completion) must not load the store, numpy or aiohttp.


def register(app: typer.Typer) -> None:
    app.command("agent")(agent)


def agent(
    ctx: typer.Context,
    scrape: Annotated[
        list[str],
        typer.Option(
            "--scrape",
            help="KIND=URL, repeatable: scrape this target (vllm=, sglang=, trtllm=, dcgm=, "
            "nvml[=fake]).",
        ),
    ] = [],  # noqa: B006 - Typer reads the default, never mutates it
    old_target: Annotated[
        list[str],
        typer.Option(
            "--target", hidden=True, callback=deprecated_alias("--target KIND=URL", "--scrape")
        ),
    ] = [],  # noqa: B006
    targets: Annotated[
        Path | None,
        typer.Option("--targets", help="YAML file of targets with labels and intervals."),
    ] = None,
    interval: Annotated[str, typer.Option(help="Default scrape interval, e.g. 5s.")] = "5s",
    scrape_timeout: Annotated[
        str | None,
        typer.Option(
            help="Default time one scrape may take, fetch and parse (default: 10s, or the "
            "interval if shorter)."
        ),
    ] = None,
    once: Annotated[bool, typer.Option(help="Scrape every target once, then exit.")] = False,
    prometheus_port: Annotated[
        int | None,
        typer.Option(
            min=1, max=65535, help="Serve canonical series for Prometheus on this port (e.g. 9464)."
        ),
    ] = None,
    prometheus_host: Annotated[
        str, typer.Option(help="Address the Prometheus endpoint binds.")
    ] = "127.0.0.1",
    otlp_endpoint: Annotated[
        str | None, typer.Option(help="Push OTLP metrics here, e.g. http://127.0.0.1:4318.")
    ] = None,
    otlp_protocol: Annotated[Literal["http", "grpc"], typer.Option(help="http or grpc.")] = "http",
    spool_dir: Annotated[
        Path | None, typer.Option(help="Where samples wait while the store is unreachable.")
    ] = None,
    node: Annotated[str | None, typer.Option(help="Node label (default: host name).")] = None,
    heartbeat: Annotated[
        str,
        typer.Option(
            help="Longest time an unchanged counter/histogram value goes unwritten (0s: write "
            "every sample)."
        ),
    ] = "60s",
    remote_write: Annotated[
        str | None,
        typer.Option(
            help="Send the samples to this Prometheus remote-write receiver instead of the "
            "store (e.g. http://127.0.0.1:9090/api/v1/write)."
        ),
    ] = None,
    remote_write_header: Annotated[
        list[str],
        typer.Option(help="NAME=VALUE, repeatable: a header of every remote-write request."),
    ] = [],  # noqa: B006
    json: JsonOption = False,
) -> None:
    """Scrape engines and GPUs into the store (or a remote-write receiver); optionally export
    via Prometheus and OTLP."""
    from slotune.collector.agent import AgentConfig, parse_headers, run_agent
    from slotune.collector.durations import parse_duration_s

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("slotune.collector.agent").setLevel(logging.INFO)
    config = AgentConfig(
        target_args=(*scrape, *old_target),
        targets_file=targets,
        interval_s=parse_duration_s(interval, field_name="--interval"),
        scrape_timeout_s=None
        if scrape_timeout is None
        else parse_duration_s(scrape_timeout, field_name="--scrape-timeout"),
        db_url=db_url(ctx),
        prometheus_port=prometheus_port,
        prometheus_host=prometheus_host,
        otlp_endpoint=otlp_endpoint,
        otlp_protocol=otlp_protocol,
        spool_dir=spool_dir,
        heartbeat_s=parse_duration_s(heartbeat, field_name="--heartbeat"),
        node=node or "",
        remote_write_url=remote_write,
        remote_write_headers=tuple(parse_headers(remote_write_header).items()),
    )
    outcomes = run_agent(config, once=once)
    if json:
        print_json([o.to_dict() for o in outcomes])
        return
    if once:
        table = Table("target", "up", "samples", "skipped lines", "seconds", "error")
        for o in outcomes:
            table.add_row(  # names and errors are user text, not markup
                escape(o.target),
                "yes" if o.is_up else "no",
                str(o.num_samples),
                str(o.num_skipped_lines),
                f"{o.duration_s:.3f}",
                escape(o.error),
            )
        console.print(table)
