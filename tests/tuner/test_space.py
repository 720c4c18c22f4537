import optuna
import pytest

from slotune.collector.errors import ConfigError
from slotune.tuner.tune.space import (
    Engine,
    ParamKind,
    default_space,
    engine_defaults,
    load_space_file,
    parse_param_override,
    powers_of_two,
)


def vllm_space(max_model_len: int = 8192):
    defaults = engine_defaults("vllm", "llama-3.1-8b", "h100-sxm", max_model_len=max_model_len)
    return default_space("vllm", defaults, max_model_len=max_model_len)


def test_vllm_defaults_are_the_engine_defaults_and_trial_zero_params():
    space = vllm_space()
    assert space.defaults["max_num_seqs"] == 1024
    assert space.defaults["max_num_batched_tokens"] == 8192
    assert space.defaults["enable_chunked_prefill"] is True
    params = space.default_params()
    assert params["max_num_seqs"] == 7  # position of 1024 in 8, 16, ..., 1024
    assert params["gpu_memory_utilization"] == 0.9
    assert "max_model_len" not in params  # fixed, not searched


def test_powers_of_two_are_choices_under_engine_names():
    space = vllm_space()
    p = {q.name: q for q in space.params}["max_num_seqs"]
    assert p.kind is ParamKind.ORDINAL
    assert p.choices == powers_of_two(8, 1024) == (8, 16, 32, 64, 128, 256, 512, 1024)
    # Sampled by position: the Optuna parameter is the index, the engine gets the value.
    study = optuna.create_study()
    study.enqueue_trial(space.default_params())
    trial = study.ask()
    assert space.suggest(trial)["max_num_seqs"] == 1024 and trial.params["max_num_seqs"] == 7


def test_long_prefill_threshold_only_with_chunked_prefill_and_budget_repaired():
    space = vllm_space(max_model_len=16384)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen_off = False
    for _ in range(40):
        trial = study.ask()
        config = space.suggest(trial)
        study.tell(trial, 0.0)
        if config["enable_chunked_prefill"]:
            assert "long_prefill_token_threshold" in trial.params
        else:
            seen_off = True
            assert "long_prefill_token_threshold" not in trial.params
            assert "long_prefill_token_threshold" not in config
            assert config["max_num_batched_tokens"] >= 16384
    assert seen_off


def test_configurations_vllm_refuses_at_startup_are_named():
    space = vllm_space()
    refused = {**space.defaults, "max_num_seqs": 1024, "max_num_batched_tokens": 512}
    reason = space.invalid_reason(refused)
    assert reason is not None and "max_num_batched_tokens (512)" in reason
    assert "max_num_seqs (1024)" in reason
    assert space.invalid_reason(space.defaults) is None
    assert space.invalid_reason({**refused, "max_num_seqs": 512}) is None


def test_grid_respects_conditions_and_has_no_duplicates():
    space = vllm_space().with_overrides(
        {
            "gpu_memory_utilization": None,
            "max_num_seqs": [64, 256],
            "max_num_batched_tokens": [2048, 8192],
        }
    )
    grid = space.grid()
    keys = {tuple(sorted(c.items())) for c in grid}
    assert len(keys) == len(grid)
    # chunked on: 2*2*2 prefix * 6 thresholds; off: budget repaired to 8192 -> 2*1*2
    assert len(grid) == 2 * 2 * 2 * 6 + 2 * 2


def test_overrides_narrow_fix_remove_and_extend():
    space = vllm_space().with_overrides(
        {
            "max_num_seqs": {"low": 64, "high": 512, "power_of_two": True},
            "gpu_memory_utilization": {"low": 0.85, "high": 0.95, "step": 0.01},
            "tensor_parallel_size": 2,
            "block_size": [16, 32],
            "long_prefill_token_threshold": None,
        }
    )
    params = {p.name: p for p in space.params}
    assert params["max_num_seqs"].choices == (64, 128, 256, 512)
    assert params["gpu_memory_utilization"].kind is ParamKind.FLOAT
    assert params["tensor_parallel_size"].kind is ParamKind.FIXED
    assert space.defaults["tensor_parallel_size"] == 2
    assert params["block_size"].choices == (16, 32)
    assert params["block_size"].kind is ParamKind.ORDINAL
    assert "long_prefill_token_threshold" not in params


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max_num_seqs=64,128,256", ("max_num_seqs", [64, 128, 256])),
        (
            "gpu_memory_utilization=0.85..0.95",
            ("gpu_memory_utilization", {"low": 0.85, "high": 0.95}),
        ),
        (
            "max_num_batched_tokens=1024..16384:pow2",
            ("max_num_batched_tokens", {"low": 1024, "high": 16384, "power_of_two": True}),
        ),
        ("tensor_parallel_size=4", ("tensor_parallel_size", 4)),
        ("enable_prefix_caching=false", ("enable_prefix_caching", False)),
        ("block_size=-", ("block_size", None)),
    ],
)
def test_param_override_forms(text, expected):
    assert parse_param_override(text) == expected


@pytest.mark.parametrize("text", ["max_num_seqs", "=3", "x=1..2:cube"])
def test_bad_param_override_names_the_fix(text):
    with pytest.raises(ConfigError, match="--param"):
        parse_param_override(text)


def test_bad_space_entries():
    space = vllm_space()
    with pytest.raises(ConfigError, match=r"low.*high"):
        space.with_overrides({"max_num_seqs": {"low": 10}})
    with pytest.raises(ConfigError, match="unknown keys"):
        space.with_overrides({"max_num_seqs": {"low": 1, "high": 2, "lo": 3}})
    with pytest.raises(ConfigError, match="unknown engine"):
        default_space("tgi", {}, max_model_len=4096)


def test_trtllm_space_uses_llm_api_names():
    defaults = engine_defaults("trtllm", "llama-3.1-8b", "h100-sxm", max_model_len=8192)
    space = default_space(Engine.TRTLLM, defaults, max_model_len=8192)
    assert "kv_cache_config.enable_block_reuse" in space.names()
    assert space.forced_defaults() == {}
    assert space.default_params()["max_batch_size"] == 8  # index of 2048 in 8..2048
    assert (
        space.default_params()["scheduler_config.capacity_scheduler_policy"]
        == "GUARANTEED_NO_EVICT"
    )


def test_default_outside_a_narrowed_range_is_forced_not_sampled():
    space = vllm_space().with_overrides({"max_num_seqs": [64, 256]})
    assert "max_num_seqs" not in space.default_params()
    assert space.forced_defaults() == {"max_num_seqs": 1024}
    study = optuna.create_study()
    study.enqueue_trial(space.default_params())
    trial = study.ask()
    config = space.suggest(trial, space.forced_defaults())
    assert config["max_num_seqs"] == 1024 and "max_num_seqs" not in trial.params
    assert config["max_num_batched_tokens"] == 8192


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe\x00binary", "not UTF-8 text"),
        (b"a: " + b"[" * 100_000, "nests deeper than YAML can be read"),
        (b"- 1\n- 2\n", "expected a mapping"),
    ],
)
def test_unreadable_space_files_are_one_clear_error(tmp_path, content, message):
    path = tmp_path / "space.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_space_file(path)
