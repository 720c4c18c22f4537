"""slotune's sampler: distinct configurations, feasible-first model, study integration."""

from __future__ import annotations

import json

import optuna
import pytest

from slotune.tuner.tune.sampler import DistinctTPESampler, make_sampler
from slotune.tuner.tune.space import SearchSpace, default_space, engine_defaults

SMALL = {
    "max_num_seqs": [64, 128, 256],
    "max_num_batched_tokens": [512, 1024, 2048, 4096],
    "enable_chunked_prefill": [True, False],
    "enable_prefix_caching": None,
    "gpu_memory_utilization": None,
    "long_prefill_token_threshold": [0, 512],
}


def small_space() -> SearchSpace:
    defaults = engine_defaults("vllm", "llama-3.1-8b", "h100-sxm", max_model_len=8192)
    return default_space("vllm", defaults, max_model_len=8192).with_overrides(SMALL)


def key(config: dict[str, object]) -> str:
    return json.dumps(sorted(config.items()))


def capacity(config: dict[str, object]) -> tuple[float, float]:
    """A toy landscape: best at 1024 tokens with chunked prefill; no chunking is infeasible."""
    if not config["enable_chunked_prefill"]:
        return 0.0, 0.5
    tokens = int(config["max_num_batched_tokens"])  # type: ignore[call-overload]
    return 10.0 - abs(tokens.bit_length() - 11) - int(config["max_num_seqs"]) / 1000, -1.0


@pytest.fixture(autouse=True)
def quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def run_study(space: SearchSpace, trials: int, seed: int = 0) -> list[str]:
    study = optuna.create_study(direction="maximize", sampler=DistinctTPESampler(space, seed=seed))
    study.enqueue_trial(space.default_params())
    seen: list[str] = []

    def objective(trial: optuna.Trial) -> float:
        config = space.suggest(trial)
        seen.append(key(config))
        value, violation = capacity(config)
        trial.set_constraint("slos", violation)
        return value

    study.optimize(objective, n_trials=trials)
    return seen


def test_never_measures_a_configuration_twice_until_the_space_is_exhausted() -> None:
    space = small_space()
    distinct = len(space.grid())
    seen = run_study(space, distinct)
    assert len(set(seen)) == distinct


def test_finds_the_best_configuration_of_a_small_space() -> None:
    space = small_space()
    best = max(capacity(c)[0] for c in space.grid())
    for seed in range(3):
        seen = run_study(space, 12, seed)
        values = [capacity(dict(json.loads(k)))[0] for k in seen]
        assert max(values) == best


def test_never_proposes_a_configuration_the_engine_refuses() -> None:
    space = small_space().with_overrides({"max_num_seqs": [256, 512, 1024]})
    refused = [c for c in space.grid() if space.invalid_reason(c)]
    assert refused  # 1024 sequences with a 512-token budget
    seen = run_study(space, len(space.grid()) - len(refused))
    assert not [k for k in seen[1:] if space.invalid_reason(dict(json.loads(k)))]
    assert len(set(seen)) == len(seen)


def test_running_trials_are_not_proposed_again() -> None:
    space = small_space()
    study = optuna.create_study(direction="maximize", sampler=DistinctTPESampler(space, seed=1))
    configs = [key(space.suggest(study.ask())) for _ in range(6)]
    assert len(set(configs)) == 6


def test_product_sampler_choice() -> None:
    space = small_space()
    assert isinstance(make_sampler("tpe", 0, space), DistinctTPESampler)
    pareto = make_sampler("tpe", 0, space, multi_objective=True)
    assert isinstance(pareto, optuna.samplers.TPESampler)
    assert isinstance(make_sampler("optuna-tpe", 0, space), optuna.samplers.TPESampler)


def first_configs(
    space: SearchSpace, seed: int, n: int, *, shortfall: float
) -> list[dict[str, object]]:
    """The first ``n`` configurations of a study where every trial has the same SLO
    ``shortfall`` (0: all feasible, with the same value) - no evidence for any region."""
    study = optuna.create_study(direction="maximize", sampler=DistinctTPESampler(space, seed=seed))
    study.enqueue_trial(space.default_params())
    configs: list[dict[str, object]] = []

    def objective(trial: optuna.Trial) -> float:
        configs.append(space.suggest(trial))
        trial.set_constraint("slos", shortfall)
        return 1.0

    study.optimize(objective, n_trials=n)
    return configs


SEARCH = {"max_num_seqs": [64, 256, 1024], "max_num_batched_tokens": [1024, 2048, 4096, 8192]}


def changes(default: dict[str, object], config: dict[str, object]) -> list[str]:
    return [k for k in default if config.get(k) != default[k]]


def test_the_search_starts_next_to_a_feasible_engine_default() -> None:
    space = small_space().with_overrides(SEARCH)
    for seed in range(5):
        default, *proposed = first_configs(space, seed, 4, shortfall=0.0)
        for config in proposed:
            assert 1 <= len(changes(default, config)) <= 2, (seed, config)


def test_the_search_leaves_a_default_that_breaks_the_slos_as_badly_as_its_neighbours() -> None:
    # Equal shortfalls everywhere (a plateau) say nothing about where to go: the search moves
    # away from what it measured instead of staying next to the failing default.
    # (after the token-budget ladder, which a plateau never stops)
    space = small_space().with_overrides(SEARCH)
    rungs = len(DistinctTPESampler(space).token_ladder)
    far = 0
    for seed in range(5):
        default, *walk, first, _ = first_configs(space, seed, rungs + 3, shortfall=1.0)
        assert [changes(default, c) for c in walk] == [["max_num_batched_tokens"]] * rungs
        far += len(changes(default, first)) >= 3
    assert far >= 4


def test_the_search_walks_the_token_budget_up_from_the_small_end_until_past_the_peak() -> None:
    space = small_space().with_overrides(SEARCH)
    ladder = DistinctTPESampler(space).token_ladder
    default = space.repair(dict(space.defaults))
    budgets = [space.engine_values(p)["max_num_batched_tokens"] for p in ladder]
    below = [b for b in SEARCH["max_num_batched_tokens"] if b < default["max_num_batched_tokens"]]
    assert budgets == sorted(below) and len(budgets) >= 2
    # best at the smallest budget: one step up does worse, and the walk stops there
    study = optuna.create_study(direction="maximize", sampler=DistinctTPESampler(space, seed=0))
    study.enqueue_trial(space.default_params())
    tried: list[dict[str, object]] = []

    def objective(trial: optuna.Trial) -> float:
        config = space.suggest(trial)
        tried.append(config)
        trial.set_constraint("slos", -1.0)
        return 1e4 / int(config["max_num_batched_tokens"])

    study.optimize(objective, n_trials=4)
    assert [changes(default, c) for c in tried[1:3]] == [["max_num_batched_tokens"]] * 2
    assert [c["max_num_batched_tokens"] for c in tried[1:3]] == budgets[:2]
    assert tried[3]["max_num_batched_tokens"] != budgets[2] or changes(default, tried[3]) != [
        "max_num_batched_tokens"
    ]


def test_a_budget_below_the_context_turns_chunked_prefill_on_for_tensorrt_llm() -> None:
    defaults = engine_defaults("trtllm", "llama-3.1-8b", "h100-sxm", max_model_len=8192)
    space = default_space("trtllm", defaults, max_model_len=8192).with_overrides(
        {"max_num_tokens": [1024, 2048, 8192], "kv_cache_config.free_gpu_memory_fraction": None}
    )
    assert defaults["enable_chunked_prefill"] is False
    ladder = [space.engine_values(p) for p in DistinctTPESampler(space).token_ladder]
    assert [(c["max_num_tokens"], c["enable_chunked_prefill"]) for c in ladder] == [
        (1024, True),
        (2048, True),
    ]
