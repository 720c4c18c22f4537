"""``slotune bench``: drive an OpenAI-compatible server, report, store, compare.

``slotune bench --url ...`` runs a benchmark (the group's own callback);
``slotune bench compare A B`` and ``slotune bench list`` work on stored runs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from slotune.collector.vocabulary import Endpoint
from slotune.ui.cli._common import (
    JsonOption,
    console,
    db_url,
    fail,
    output_file,
    print_json,
)
from slotune.ui.cli._options import (
    InputLenOption,
    NoStoreOption,
    NumRequestsOption,
    OutputLenOption,
    RateOption,
    SeedOption,
    SloOption,
    TimeScaleOption,
    TraceOption,
    WorkloadOption,
    deprecated_alias,
)

if TYPE_CHECKING:
    from slotune.collector.bench import BenchResult

# collector.bench is imported inside the commands: building the CLI (every slotune run, shell
# completion) must not load aiohttp, the store (SQLAlchemy, Alembic) or numpy.

bench_app = typer.Typer(
    invoke_without_command=True,
    help=(
        "Benchmark an OpenAI-compatible server (vLLM, SGLang, TensorRT-LLM, the emulated engine): "
        "streamed TTFT/ITL/TPOT/E2E, goodput, SLO attainment, max rate. See docs/bench.md."
    ),
)


def _check_timeout(value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"must be a number of seconds greater than 0, got {value}")
    return value


_W = "workload"
_A = "arrivals"
_R = "run size"


@bench_app.callback()
def bench(
    ctx: typer.Context,
    url: Annotated[
        str | None, typer.Option(help="Server root, e.g. http://127.0.0.1:8000.")
    ] = None,
    served_model_name: Annotated[
        str | None,
        typer.Option(
            help="The name the server serves the model under (default: first in /v1/models)."
        ),
    ] = None,
    old_model: Annotated[
        str | None,
        typer.Option(
            "--model", hidden=True, callback=deprecated_alias("--model", "--served-model-name")
        ),
    ] = None,
    endpoint: Annotated[Endpoint, typer.Option(help="API to call.")] = Endpoint.COMPLETIONS,
    workload: WorkloadOption = None,
    trace: TraceOption = None,
    input_len: InputLenOption = None,
    output_len: OutputLenOption = None,
    shared_prefix: Annotated[
        int, typer.Option(help="Shared system-prompt tokens.", rich_help_panel=_W)
    ] = 0,
    turns: Annotated[
        int, typer.Option(help="Requests per conversation (prompts grow).", rich_help_panel=_W)
    ] = 1,
    rate: RateOption = None,
    burstiness: Annotated[
        float, typer.Option(help="Gamma shape: 1 Poisson, <1 burstier.", rich_help_panel=_A)
    ] = 1.0,
    concurrency: Annotated[
        int | None, typer.Option(help="Closed loop: requests in flight.", rich_help_panel=_A)
    ] = None,
    trace_timing: Annotated[
        bool,
        typer.Option("--trace-timing", rich_help_panel=_A, help="Send at the trace's timestamps."),
    ] = False,
    time_scale: TimeScaleOption = None,
    num_requests: NumRequestsOption = None,
    duration: Annotated[
        float | None, typer.Option(help="Measure for S seconds instead.", rich_help_panel=_R)
    ] = None,
    warmup: Annotated[
        int, typer.Option(help="Requests sent first, left out.", rich_help_panel=_R)
    ] = 0,
    cooldown: Annotated[
        bool,
        typer.Option(
            "--cooldown",
            help="Keep sending after the measured requests until they finish, so the last "
            "ones see the same load; these extra requests (up to --num-requests more) are "
            "left out, and those still in flight at the end are cancelled. Off: exactly "
            "--warmup + --num-requests requests are sent.",
            rich_help_panel=_R,
        ),
    ] = False,
    slo: SloOption = None,
    fail_on_slo: Annotated[
        bool,
        typer.Option(
            "--fail-on-slo", help="Exit with status 3 when an --slo is missed (for CI gates)."
        ),
    ] = False,
    find_max_rate: Annotated[
        bool, typer.Option("--find-max-rate", help="Search the highest --rate meeting every --slo.")
    ] = False,
    max_rate_tolerance: Annotated[
        float, typer.Option(help="Relative bracket width to stop at.")
    ] = 0.05,
    max_rate_steps: Annotated[int, typer.Option(help="Most measurements of the search.")] = 12,
    seed: SeedOption = 0,
    timeout: Annotated[
        float,
        typer.Option(
            help="Limit of each request in seconds, from send to last byte.",
            callback=_check_timeout,
        ),
    ] = 600.0,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="OPENAI_API_KEY",
            show_default=False,
            help="Bearer token (env OPENAI_API_KEY); never stored or printed.",
        ),
    ] = None,
    tokenizer: Annotated[
        Path | None,
        typer.Option(help="Local Hugging Face tokenizer directory for exact prompt lengths."),
    ] = None,
    ignore_eos: Annotated[
        bool, typer.Option(help="Send ignore_eos/min_tokens (vLLM, SGLang).")
    ] = True,
    stream: Annotated[bool, typer.Option(help="Stream responses (SSE).")] = True,
    name: Annotated[str | None, typer.Option(help="Run name in the store.")] = None,
    no_store: NoStoreOption = False,
    save: Annotated[
        Path | None,
        typer.Option(help="Write the result JSON (with records).", callback=output_file),
    ] = None,
    requests_out: Annotated[
        Path | None,
        typer.Option(
            help="Write the measured requests as JSONL (sim calibrate --observed).",
            callback=output_file,
        ),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Run a benchmark (subcommands: compare, list)."""
    if ctx.invoked_subcommand is not None:
        return
    if url is None:
        console.print(ctx.get_help())
        raise typer.Exit(code=2)
    from slotune.collector.bench import (
        BenchConfig,
        Outputs,
        arrival_from_flags,
        max_rate_table,
        measure,
        measure_max_rate,
        run_failure,
    )
    from slotune.collector.slo import parse_slos

    arrival = arrival_from_flags(
        rate=rate,
        burstiness=burstiness,
        concurrency=concurrency,
        trace_timing=trace_timing,
        time_scale=1.0 if time_scale is None else time_scale,
    )
    config = BenchConfig(
        url=url,
        arrival=arrival,
        model=served_model_name or old_model,
        endpoint=endpoint,
        workload=workload,
        trace_file=str(trace) if trace else None,
        input_len=input_len,
        output_len=output_len,
        shared_prefix_tokens=shared_prefix,
        turns=turns,
        num_requests=num_requests,
        duration_s=duration,
        warmup=warmup,
        cooldown=cooldown,
        slos=tuple(parse_slos(slo or [])),
        seed=seed,
        timeout_s=timeout,
        api_key=api_key,
        tokenizer=str(tokenizer) if tokenizer else None,
        stream=stream,
        ignore_eos=ignore_eos,
        name=name,
    )
    outputs = Outputs(db_url(ctx), not no_store, save, requests_out)
    if find_max_rate:
        found = measure_max_rate(
            config,
            outputs,
            rel_tolerance=max_rate_tolerance,
            max_steps=max_rate_steps,
            progress=not json,
        )
        if json:
            print_json(found.to_dict())
        else:
            console.print(max_rate_table(found.found.result))
        return
    measured = measure(config, outputs, progress=not json)
    if json:
        print_json(measured.to_dict())
    else:
        _print_run(measured.result, measured.run_id)
    failure = run_failure(measured.result.summary, fail_on_slo=fail_on_slo)
    if failure is not None:
        fail(*failure)


def _print_run(result: BenchResult, run_id: int | None) -> None:
    from slotune.collector.bench import run_name, summary_table

    title = f"{run_name(result)} | {result.config.workload_name}"
    console.print(summary_table(result.summary, title=title))
    if run_id is not None:
        console.print(f"stored as run {run_id}", highlight=False)


@bench_app.command("compare")
def compare_cmd(
    ctx: typer.Context,
    run_a: Annotated[str, typer.Argument(help="Run id (slotune bench list) or --save file.")],
    run_b: Annotated[str, typer.Argument(help="Run id or --save file.")],
    json: JsonOption = False,
) -> None:
    """Show two runs side by side with the relative change."""
    from slotune.collector.bench import compare_summaries, compare_table, resolve_run

    a = resolve_run(db_url(ctx), run_a)
    b = resolve_run(db_url(ctx), run_b)
    rows = compare_summaries(a.summary, b.summary)
    if json:
        print_json({"a": a.label, "b": b.label, "rows": [r.to_dict() for r in rows]})
    else:
        console.print(compare_table(rows, a.label, b.label))


@bench_app.command("list")
def list_cmd(ctx: typer.Context, json: JsonOption = False) -> None:
    """List stored benchmark runs, newest first."""
    from slotune.collector.bench import list_runs, runs_table

    infos = list_runs(db_url(ctx))
    if json:
        print_json(
            [
                {
                    "run_id": i.run_id,
                    "name": i.meta.name,
                    "model": i.meta.model,
                    "workload": i.meta.workload,
                    "url": i.meta.url,
                    "started_at": i.meta.started_at,
                    "num_requests": i.num_requests,
                    "summary": dict(i.summary),
                }
                for i in infos
            ]
        )
        return
    console.print(runs_table(infos))


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
