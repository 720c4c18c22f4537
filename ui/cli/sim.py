"""``slotune sim``: replay a workload through the engine simulator, in seconds, on a CPU."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.core import TyperGroup

from slotune.collector.vocabulary import DEFAULT_ENGINE
from slotune.ui.cli._common import JsonOption, console, err_console, output_file, print_json
from slotune.ui.cli._options import (
    WORKLOAD_PANEL,
    ConcurrencyOption,
    EngineOption,
    InputLenOption,
    MaybeGpuOption,
    MaybeModelOption,
    NumRequestsOption,
    OutputLenOption,
    RateOption,
    SeedOption,
    SloOption,
    TimeScaleOption,
    TraceOption,
    WorkloadOption,
)
from slotune.ui.cli._sim_calibrate import calibrate_command

if TYPE_CHECKING:
    from slotune.tuner.sim import ProgressCallback, SimResult

# The simulator is imported inside the command: importing tuner.sim loads numpy and the
# catalogs, which building the CLI (every slotune run, shell completion) must not do.

_PROGRESS_MIN_REQUESTS = 2000


class _SimGroup(TyperGroup):
    """``slotune sim``: a command that takes engine flags it does not declare, with one
    subcommand, ``calibrate``.

    Without ``calibrate`` first, every argument is sim's (its options, then the engine flags,
    in any order), as for a plain command. Its epilog lists every engine flag, read from the
    simulator only when the help shows it (Typer builds every command on each slotune run).
    """

    # Typer hands its own Context; the base class names the click it vendors (private).
    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        if any(a in self.commands for a in args):
            return super().parse_args(ctx, args)
        ctx.allow_interspersed_args = True
        # the plain command's parsing (TyperGroup's base): every extra argument in ctx.args
        return super(TyperGroup, self).parse_args(ctx, args)

    @property
    def epilog(self) -> str | None:
        from slotune.tuner.sim import TRTLLM_FLAGS_HELP, VLLM_FLAGS_HELP

        return (
            f"{VLLM_FLAGS_HELP}\n\n{TRTLLM_FLAGS_HELP}\n\nExample: slotune sim --model "
            "llama-3.1-8b --gpu h100-sxm --workload azure-conv --max-num-seqs 128 "
            "--slo ttft:p99<=500ms --json. See docs/simulator.md."
        )

    @epilog.setter
    def epilog(self, value: str | None) -> None:
        """Keep the getter's epilog: the constructor sets the one Typer was given (none)."""


_EXTRA_ARGS = {"allow_extra_args": True, "ignore_unknown_options": True}

sim_app = typer.Typer(cls=_SimGroup, invoke_without_command=True, context_settings=_EXTRA_ARGS)
sim_app.command("calibrate", context_settings=_EXTRA_ARGS)(calibrate_command)


def register(app: typer.Typer) -> None:
    app.add_typer(sim_app, name="sim")


@sim_app.callback()
def sim(
    ctx: typer.Context,
    model: MaybeModelOption = None,
    gpu: MaybeGpuOption = None,
    engine: EngineOption = DEFAULT_ENGINE,
    workload: WorkloadOption = None,
    trace: TraceOption = None,
    input_len: InputLenOption = None,
    output_len: OutputLenOption = None,
    rate: RateOption = None,
    concurrency: ConcurrencyOption = None,
    time_scale: TimeScaleOption = None,
    num_requests: NumRequestsOption = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Every request's max_tokens; the workload's output lengths become where "
            "the model emits EOS (finish_reason stop), capped here (length). Default: "
            "requests run to the workload's output lengths.",
            rich_help_panel=WORKLOAD_PANEL,
        ),
    ] = None,
    slo: SloOption = None,
    seed: SeedOption = 0,
    catalog: Annotated[
        list[Path] | None, typer.Option(help="Extra GPU/model catalog YAML (repeat).")
    ] = None,
    series: Annotated[
        bool, typer.Option("--series", help="Add the engine time series to the JSON.")
    ] = False,
    requests_out: Annotated[
        Path | None,
        typer.Option(
            help="Also write every simulated request as JSONL in the measured-requests "
            "format of `slotune sim calibrate --observed` (plus request_id).",
            callback=output_file,
        ),
    ] = None,
    gpus: Annotated[bool, typer.Option("--list-gpus", help="List known GPUs and exit.")] = False,
    models: Annotated[
        bool, typer.Option("--list-models", help="List known models and exit.")
    ] = False,
    json_: JsonOption = False,
) -> None:
    """Simulate a vLLM / TensorRT-LLM engine serving a workload, in seconds on a CPU.

    Engine flags take the engine's own names, e.g. --max-num-seqs 128
    --no-enable-prefix-caching. `slotune sim calibrate` fits the simulator to measured
    requests.
    """
    from slotune.tuner.sim import WorkloadChoice, simulate_flags
    from slotune.tuner.sim.catalog import load_catalog_file

    for path in catalog or ():
        load_catalog_file(path)
    if gpus or models:
        _print_catalog(gpus=gpus, as_json=json_)
        return
    if ctx.invoked_subcommand is not None:
        return
    choice = WorkloadChoice(
        workload, trace, input_len, output_len, rate, time_scale, num_requests, seed, concurrency
    )
    with _ProgressBar(enabled=not json_) as callback:
        _, result = simulate_flags(
            ctx.args,
            engine=engine,
            model=model,
            gpu=gpu,
            workload=choice,
            slos=slo or (),
            max_tokens=max_tokens,
            requests_out=requests_out,
            progress=callback,
        )
    if json_:
        print_json(result.to_dict(include_series=series))
        return
    _render(result)


class _ProgressBar:
    """A transient progress bar on stderr, shown once a run has enough requests to wait for."""

    def __init__(self, *, enabled: bool) -> None:
        self._enabled = enabled
        self._bar: Progress | None = None

    def __enter__(self) -> ProgressCallback | None:
        if not self._enabled:
            return None
        return self._update

    def _update(self, done: int, total: int) -> None:
        if self._bar is None:
            if total < _PROGRESS_MIN_REQUESTS:
                return
            self._bar = Progress(
                TextColumn("simulating"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err_console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("sim", total=None)
        self._bar.update(self._task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _render(result: SimResult) -> None:
    from slotune.collector.bench import summary_table

    for line in result.kv_log:
        console.print(f"[dim]{line}[/]", highlight=False)
    summary = result.summary.to_dict()
    params = result.config
    console.print(
        summary_table(
            result.summary,
            title=f"simulated {params['engine']}: {params['model']} on {params['gpu']}",
        )
    )
    engine = Table.grid(padding=(0, 2))
    engine.add_column()
    engine.add_column(justify="right")
    split = summary["step_time_breakdown"]
    for label, value in (
        ("prefix cache hit rate", f"{summary['prefix_hit_rate']:.1%}"),
        ("preemptions", str(summary["preemptions"])),
        ("KV blocks / tokens", f"{summary['kv_blocks']:,} / {summary['kv_tokens']:,}"),
        ("engine steps", f"{split['num_steps']:,}"),
        (
            "step time compute / memory / comm / overhead",
            " / ".join(
                f"{split[k]:.0%}"
                for k in ("compute_frac", "memory_frac", "communication_frac", "overhead_frac")
            ),
        ),
    ):
        engine.add_row(label, value)
    console.print(engine)


def _print_catalog(*, gpus: bool, as_json: bool) -> None:
    from slotune.tuner.sim.catalog import list_gpus, list_models

    entries: list[Any] = list_gpus() if gpus else list_models()
    if as_json:
        print_json([dataclasses.asdict(e) for e in entries])
        return
    table = Table()
    if gpus:
        for col in ("id", "name", "memory (GiB)", "HBM (TB/s)", "bf16 TFLOP/s", "fp8 TFLOP/s"):
            table.add_column(col)
        for g in entries:
            table.add_row(
                g.id,
                g.name,
                f"{g.mem_bytes / 2**30:.0f}",
                f"{g.mem_bw_bytes_s / 1e12:.2f}",
                f"{g.bf16_flops / 1e12:.0f}",
                f"{g.fp8_flops / 1e12:.0f}",
            )
    else:
        for col in ("id", "hf name", "params (B)", "layers", "heads / kv", "experts", "max len"):
            table.add_column(col)
        for m in entries:
            experts = f"{m.num_active_experts}/{m.num_experts}" if m.num_experts else "-"
            table.add_row(
                m.id,
                m.hf_name,
                f"{m.num_params / 1e9:.1f}",
                str(m.num_layers),
                f"{m.num_heads}/{m.num_kv_heads}",
                experts,
                f"{m.max_position_embeddings:,}",
            )
    console.print(table)
