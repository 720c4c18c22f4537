"""Simulate the closed-loop runs of a silicon CSV (``collector.silicon``) one by one.

A row becomes the engine's default configuration for its model, GPU, tensor-parallel size
and weight precision, serving ``concurrency`` requests in flight of exactly its input and
output lengths (``slotune sim --concurrency``). Rows the simulator cannot model are kept with
the reason, so a report lists them instead of dropping them.
"""

from __future__ import annotations

from dataclasses import dataclass

from slotune.collector.errors import SlotuneError
from slotune.collector.silicon import SiliconRow
from slotune.collector.workload import Trace, TraceRequest
from slotune.tuner.engines.base import EngineConfig
from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.sim.catalog import QUANTIZATIONS, get_gpu, get_model
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.simulator import replay_timings

SYSTEM_GPUS = {
    "h100_sxm": "h100-sxm",
    "h100_pcie": "h100-pcie",
    "h200_sxm": "h200",
    "b200_sxm": "b200",
    "a100_sxm": "a100-80gb",
    "l40s": "l40s",
}
"""AIConfigurator's system names -> the catalog's GPU ids."""

_TENSOR_PARALLEL = {"vllm": "tensor_parallel_size", "sglang": "tp_size"}
# Defaults that changed between releases: (engine, parameter, value before, first release
# with today's default). vLLM turned async scheduling on by default after 0.12
# (vllm-project/vllm#27614).
_OLDER_DEFAULTS = (("vllm", "async_scheduling", False, (0, 13)),)
# Steady-state requests measured per row, over the warm-up and cool-down waves.
_MEASURED_WAVES = 3


@dataclass(frozen=True, slots=True)
class SiliconCase:
    """A row with the engine configuration that simulates it."""

    row: SiliconRow
    config: EngineConfig


@dataclass(frozen=True, slots=True)
class SimulatedRow:
    """A row's simulated means next to its measured ones (milliseconds)."""

    row: SiliconRow
    ttft_ms: float
    tpot_ms: float


def silicon_case(row: SiliconRow, *, gpu: str | None = None) -> SiliconCase | str:
    """The configuration that simulates ``row``, or why the simulator cannot model it.

    Args:
        row: the measured run.
        gpu: the catalog GPU to simulate; by default the row's system through
            :data:`SYSTEM_GPUS`.
    """
    if row.mode != "agg":
        return f"{row.mode} serving (split prefill and decode workers) is not simulated"
    if row.pipeline_parallel_size > 1 or row.attention_dp_size > 1:
        return "pipeline or attention data parallelism is not simulated"
    quantization = None if row.precision in ("bf16", "fp16") else row.precision
    if quantization is not None and quantization not in QUANTIZATIONS:
        return f"{row.precision} weights are not simulated"
    gpu_id = gpu or SYSTEM_GPUS.get(row.system)
    if gpu_id is None:
        return f"system {row.system!r} has no GPU in the catalog"
    try:
        model = get_model(row.model_path)
        get_gpu(gpu_id)
        adapter = adapter_for(row.engine)
    except SlotuneError:
        return f"{row.engine} / {row.model_path} is not in the catalogs"
    if model.is_moe:
        return "mixture-of-experts models are not checked against measurements yet"
    params: dict[str, object] = {
        _TENSOR_PARALLEL.get(row.engine, "tensor_parallel_size"): row.tensor_parallel_size
    }
    if quantization is not None:
        params["quantization"] = quantization
    params |= _release_defaults(row)
    return SiliconCase(row, adapter.config_from_params(model.id, gpu_id, params))


def _release_defaults(row: SiliconRow) -> dict[str, object]:
    """The defaults of the row's engine release where they differ from the current one."""
    release = _version(row.engine_version)
    return {
        name: value
        for engine, name, value, since in _OLDER_DEFAULTS
        if engine == row.engine and release is not None and release < since
    }


def _version(text: str) -> tuple[int, int] | None:
    parts = text.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def closed_loop_trace(row: SiliconRow, *, waves: int = _MEASURED_WAVES) -> Trace:
    """``(waves + 2) x concurrency`` requests of the row's lengths (warm-up and cool-down
    waves included), arrival times left to the closed loop."""
    n = (waves + 2) * row.concurrency
    request = TraceRequest(0.0, row.input_tokens, row.output_tokens)
    return Trace(name=f"silicon:{row.row_id}", requests=(request,) * n)


def simulate_case(case: SiliconCase, *, core: EngineCore | None = None) -> SimulatedRow:
    """Simulate one row in a closed loop and return its steady-state means.

    Args:
        case: the row and its configuration.
        core: a core built by the caller (with its own cost model); one from the case's
            configuration by default.

    Raises:
        ConfigError / EngineConfigError: the engine refuses the configuration.
    """
    row = case.row
    core = core or EngineCore.create(case.config)
    timings = replay_timings(core, closed_loop_trace(row), concurrency=row.concurrency)
    ttft, tpot = [], []
    for t in timings:
        if t.first_token_s is None or t.finished_s is None:
            continue
        ttft.append(t.first_token_s - t.arrival_s)
        if row.output_tokens > 1:
            tpot.append((t.finished_s - t.first_token_s) / (row.output_tokens - 1))
    if not ttft:
        return SimulatedRow(row, float("inf"), float("inf"))
    return SimulatedRow(
        row,
        1e3 * sum(ttft) / len(ttft),
        1e3 * sum(tpot) / len(tpot) if tpot else 0.0,
    )
