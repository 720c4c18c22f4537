"""One suite, every registered engine adapter: what the rest of slotune relies on an adapter for.

A new engine registered in ``tuner.engines.registry`` runs through these tests unchanged.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import yaml

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.collector.workload.traces import Trace, TraceRequest
from slotune.tuner.engines.base import EngineAdapter, EngineConfig, Knob, ResolvedConfig
from slotune.tuner.engines.registry import adapter_for, adapters, engines
from slotune.tuner.sim.catalog import get_model
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.simulator import simulate
from slotune.tuner.sim.view import PrefixCache
from slotune.tuner.tune.export import export_config
from slotune.tuner.tune.space import default_space, engine_defaults

MODEL, GPU = "llama-3.1-8b", "h100-sxm"
MAX_LEN = 4096
# Every engine has a parameter for these; advice and diagnosis speak of them.
REQUIRED_KNOBS = (
    Knob.MAX_RUNNING,
    Knob.TOKEN_BUDGET,
    Knob.CHUNKED_PREFILL,
    Knob.PREFIX_CACHE,
    Knob.MEMORY_FRACTION,
    Knob.MAX_LEN,
    Knob.TENSOR_PARALLEL,
)


@pytest.fixture(params=engines(), ids=str)
def adapter(request: pytest.FixtureRequest) -> EngineAdapter:
    return adapter_for(request.param)


def _defaults(adapter: EngineAdapter) -> dict[str, int | float | bool | str]:
    return engine_defaults(adapter.engine, MODEL, GPU, max_model_len=MAX_LEN)


def _set(adapter: EngineAdapter, **params: object) -> EngineConfig:
    return adapter.config_from_params(MODEL, GPU, {adapter.length_param: MAX_LEN, **params})


def test_the_registry_serves_each_engine_its_own_adapter(adapter):
    assert adapter_for(adapter.engine.value) is adapter
    assert adapter in adapters()
    assert adapter.config_type.engine is adapter.engine
    assert adapter.label and adapter.flags_help


def test_an_unregistered_engine_is_refused_naming_the_registered_ones():
    with pytest.raises(ConfigError, match="unknown engine 'tgi'") as e:
        adapter_for("tgi")
    assert all(engine.value in str(e.value) for engine in engines())


def test_the_default_configuration_resolves_and_its_parameters_go_back_in(adapter):
    resolved = adapter.resolve(adapter.config_from_params(MODEL, GPU, {}))
    assert isinstance(resolved, ResolvedConfig)
    assert resolved.engine is adapter.engine
    params = resolved.to_dict()
    assert (params.pop("engine"), params.pop("model"), params.pop("gpu")) == (
        adapter.engine.value,
        MODEL,
        GPU,
    )
    assert adapter.resolve(adapter.config_from_params(MODEL, GPU, params)) == resolved


def test_an_unknown_parameter_is_refused_with_the_known_ones(adapter):
    with pytest.raises(ConfigError, match=r"not_a_knob.*known"):
        adapter.config_from_params(MODEL, GPU, {"not_a_knob": 1})


def test_aliases_knobs_and_fixed_parameters_name_real_parameters(adapter):
    names = set(_defaults(adapter))
    assert adapter.length_param in names
    assert set(adapter.fixed_params) <= names
    assert set(adapter.param_aliases.values()) <= names
    assert set(REQUIRED_KNOBS) <= set(adapter.knob_names)
    for knob in adapter.knob_names:
        assert set(adapter.knob_params(knob, True)) <= names, knob


def test_flags_round_trip_through_argv(adapter, tmp_path: Path):
    config = adapter.config_from_params(MODEL, GPU, _defaults(adapter))
    options = tmp_path / "options.yaml"
    argv = adapter.to_argv(config, options_path=str(options))
    options.write_text(yaml.safe_dump(adapter.launch_files(config)))
    assert adapter.parse_flags(argv, model=MODEL, gpu=GPU) == config


def test_an_unknown_flag_is_refused(adapter):
    with pytest.raises(ConfigError):
        adapter.parse_flags(["--not-a-flag", "1"], model=MODEL, gpu=GPU)


def test_the_launch_command_and_the_export_name_the_model(adapter):
    hf_name = get_model(MODEL).hf_name
    config = _set(adapter)
    assert hf_name in adapter.launch_command(config, options_path="options.yaml")
    assert hf_name in adapter.export(config)
    space = default_space(adapter.engine, _defaults(adapter), max_model_len=MAX_LEN)
    text = export_config(
        space.defaults, engine=adapter.engine.value, model=MODEL, gpu=GPU, fmt=adapter.engine
    )
    assert hf_name in text
    assert text.endswith("\n")


def test_every_configuration_of_the_default_space_is_one_the_engine_takes(adapter):
    space = default_space(adapter.engine, _defaults(adapter), max_model_len=MAX_LEN)
    assert space.params
    grid = space.grid()
    for config in grid[:: max(1, len(grid) // 40)]:
        if space.invalid_reason(config) is not None:
            continue
        engine_config = adapter.config_from_params(MODEL, GPU, config)
        # A refusal worded like the engine is a trial's result; a ConfigError is a bug.
        with contextlib.suppress(EngineConfigError):
            adapter.resolve(engine_config)


def test_the_sim_view_reads_the_configuration(adapter):
    core = EngineCore.create(_set(adapter))
    view, capacity = core.view, core.capacity
    assert view.max_running >= 1
    assert view.token_budget >= 1
    assert view.max_len == MAX_LEN
    assert view.block_size == capacity.block_size == core.block_manager.block_size
    assert capacity.num_blocks > 0
    assert view.tensor_parallel_size == 1
    assert core.kv_log_lines()
    off = EngineCore.create(_set(adapter, **adapter.knob_params(Knob.PREFIX_CACHE, False))).view
    on = EngineCore.create(_set(adapter, **adapter.knob_params(Knob.PREFIX_CACHE, True))).view
    assert off.prefix_cache is PrefixCache.NONE
    assert on.prefix_cache is not PrefixCache.NONE
    unchunked = adapter.knob_params(Knob.CHUNKED_PREFILL, False)
    assert not EngineCore.create(_set(adapter, **unchunked)).view.chunked_prefill
    budget = adapter.knob_params(Knob.TOKEN_BUDGET, 2048)
    assert EngineCore.create(_set(adapter, **budget)).view.token_budget == 2048


def test_a_short_trace_simulates_to_the_end(adapter):
    trace = Trace(
        "contract",
        tuple(
            TraceRequest(timestamp_s=i * 0.05, input_tokens=200 + 10 * i, output_tokens=20)
            for i in range(20)
        ),
    )
    result = simulate(_set(adapter), trace)
    assert len(result.records) == 20
    assert all(t.finished_s is not None for t in result.timings)
    assert result.config["engine"] == adapter.engine.value
