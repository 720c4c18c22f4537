"""Command-line options shared by several commands, declared once with their one meaning.

A flag that appears in several commands (``slotune bench``, ``sim``, ``tune``, ``demo``,
``emulate``) means the same thing in each; its type, help text and range check live here, and
its documentation is in docs/options.md. A command takes the ``Annotated`` alias as its
parameter type and sets its own default, e.g. ``rate: RateOption = None``.

- ``--workload NAME`` / ``--trace FILE``: the requests to send (a bundled trace, or a file).
- ``--rate R``: offered load, Poisson arrivals at R requests/s (instead of the trace's
  timestamps).
- ``--time-scale F``: multiply the trace's gaps between arrivals by F (2 doubles every gap and
  halves the rate; 0.5 doubles the rate).
- ``--num-requests N``: the number of measured requests, taken in order from the workload
  (a trace's first N; N generated for a synthetic workload). Warm-up requests are extra.
- ``--slo SPEC``: an SLO in shorthand, repeatable.
- ``--seed S``: the seed of everything random in the run (lengths, prompts, arrivals, sampler).
- ``--speedup N``: the emulated GPU runs N times faster than real time; every reported time is
  in real-GPU seconds (emulated engine, tuner's launch backend, demo).
- ``--model ID`` / ``--gpu ID``: a catalog model and GPU (the simulator's, the tuner's); the
  name a server serves a model under is ``bench --served-model-name``.
- ``--input-len`` / ``--output-len``: synthetic lengths (a fixed number or a distribution).
- ``--no-store``: do not save the result (a run, a diagnosis, a fleet plan) in the store.
- ``--json``: :data:`~ui.cli._common.JsonOption`.

A renamed flag keeps its old spelling for one release as a hidden option whose callback is
:func:`deprecated_alias`.

Only the typer and click libraries are imported here: every ``slotune`` run builds the CLI.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from slotune.collector.vocabulary import Engine

T = TypeVar("T")

WORKLOAD_PANEL = "workload"

WORKLOAD_NAMES = "azure-code, azure-conv, mooncake-conversation, mooncake-synthetic"


def _positive_finite(name: str, value: float | None) -> float | None:
    if value is not None and (math.isnan(value) or value <= 0):
        raise typer.BadParameter(f"{name} must be a number greater than 0, got {value}")
    return value


def _check_rate(value: float | None) -> float | None:
    # inf is a valid offered load for the load generator (every request at once).
    return _positive_finite("--rate", value)


def _check_time_scale(value: float | None) -> float | None:
    if value is not None and math.isinf(value):
        raise typer.BadParameter(f"--time-scale must be finite, got {value}")
    return _positive_finite("--time-scale", value)


def _check_speedup(value: float) -> float:
    if math.isinf(value):
        raise typer.BadParameter(f"--speedup must be finite, got {value}")
    _positive_finite("--speedup", value)
    return value


# Typer lists an Enum's values as the option's choices.
EngineOption = Annotated[Engine, typer.Option("--engine", help="The serving engine.")]
WorkloadOption = Annotated[
    str | None,
    typer.Option(
        "--workload",
        help=f"Bundled trace: {WORKLOAD_NAMES}.",
        rich_help_panel=WORKLOAD_PANEL,
    ),
]
TraceOption = Annotated[
    Path | None,
    typer.Option(
        "--trace",
        help="Trace file (canonical JSONL, Azure CSV, Mooncake JSONL).",
        rich_help_panel=WORKLOAD_PANEL,
    ),
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        min=1,
        help="Closed loop: keep C requests in flight, each finished one replaced at once "
        "(the trace's timestamps and --rate are ignored). The first and last C requests are "
        "warm-up and cool-down; the figures cover the steady state in between.",
        rich_help_panel=WORKLOAD_PANEL,
    ),
]
RateOption = Annotated[
    float | None,
    typer.Option(
        "--rate",
        help="Offered load: Poisson arrivals at R requests/s (default: the trace's timestamps).",
        callback=_check_rate,
        rich_help_panel=WORKLOAD_PANEL,
    ),
]
TimeScaleOption = Annotated[
    float | None,
    typer.Option(
        "--time-scale",
        help="Multiply the trace's gaps between arrivals (2 = half the rate).",
        callback=_check_time_scale,
        rich_help_panel=WORKLOAD_PANEL,
    ),
]
NumRequestsOption = Annotated[
    int | None,
    typer.Option(
        "--num-requests",
        min=1,
        help="Measured requests, taken in order from the workload (warm-up is extra).",
        rich_help_panel=WORKLOAD_PANEL,
    ),
]
SloOption = Annotated[
    list[str] | None,
    typer.Option("--slo", help="SLO, repeatable: 'ttft:p99<=500ms', 'itl:p99<=50ms'."),
]
SeedOption = Annotated[
    int,
    typer.Option("--seed", min=0, help="Seed of lengths, prompts, arrivals and the sampler."),
]
SpeedupOption = Annotated[
    float,
    typer.Option(
        "--speedup",
        help="Run the emulated GPU N times faster than real time (times stay in GPU seconds).",
        callback=_check_speedup,
    ),
]


def deprecated_alias(old: str, new: str) -> Callable[[T], T]:
    """An option callback for a flag's old spelling: one warning line on stderr when given.

    The old spelling keeps working for one release, then goes.
    """

    def warn(value: T) -> T:
        if value:
            typer.echo(f"warning: {old} is deprecated; use {new}", err=True)
        return value

    return warn


ModelOption = Annotated[
    str, typer.Option("--model", help="Catalog model id (slotune sim --list-models).")
]
MaybeModelOption = Annotated[
    str | None, typer.Option("--model", help="Catalog model id (slotune sim --list-models).")
]
GpuOption = Annotated[str, typer.Option("--gpu", help="Catalog GPU id (slotune sim --list-gpus).")]
MaybeGpuOption = Annotated[
    str | None, typer.Option("--gpu", help="Catalog GPU id (slotune sim --list-gpus).")
]
InputLenOption = Annotated[
    str | None,
    typer.Option(
        "--input-len",
        help="Synthetic prompt lengths: 512, uniform:128,1024, normal:512,64, "
        "lognormal:6.2,0.8, empirical:azure-conv.",
        rich_help_panel=WORKLOAD_PANEL,
    ),
]
OutputLenOption = Annotated[
    str | None,
    typer.Option(
        "--output-len",
        help="Synthetic output lengths (the same forms).",
        rich_help_panel=WORKLOAD_PANEL,
    ),
]
NoStoreOption = Annotated[
    bool, typer.Option("--no-store", help="Do not save the result in the store.")
]
