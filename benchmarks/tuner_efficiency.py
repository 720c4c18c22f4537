"""How many trials does each search method need to come within 3 % of the best configuration?

For each scenario (engine, model, GPU, workload, SLOs) the simulator measures the capacity
(highest request rate with every SLO holding, found by the max-rate search) of *every*
configuration of a discretised space: that exhaustive grid gives the oracle. Search methods
then run as Optuna studies whose objective looks the capacity up in that table (the same
numbers a real simulated study would measure, without re-simulating), each starting from the
engine's default configuration as trial 0:

- ``tpe``: slotune's sampler (``slotune tune``'s default);
- ``optuna-tpe``: Optuna's multivariate TPE as it is;
- ``gp``: Optuna's GPSampler (needs PyTorch; ``--methods tpe,gp,random``);
- ``random``: random search;
- ``auto_tune``: vLLM ``auto_tune.sh``-style grid, ``max_num_seqs`` x
  ``max_num_batched_tokens`` (TensorRT-LLM: ``max_batch_size`` x ``max_num_tokens``; SGLang:
  ``max_running_requests`` x ``chunked_prefill_size``) in the script's nested-loop order,
  other parameters at their defaults (one order for every seed).

Reported per scenario: the oracle, the default's capacity, and over ``--seeds`` seeds the
median number of trials (trial 0 included) until the best feasible value found is within 3 %
of the oracle ("-" when most never get there within ``--budget``), whether slotune's median
is at or below the best peer's, and the median number of trials to the first configuration
meeting every SLO. Run over every scenario, the script writes ``tuner_efficiency.md`` next to
itself from that output.

Usage::

    .venv/bin/python benchmarks/tuner_efficiency.py [--seeds 20] [--budget 60] [--jobs 2]
    .venv/bin/python benchmarks/tuner_efficiency.py --live 300 --seeds 20 --budget 30 \
        --scenario trtllm-70b-tp4-h100-azure-code --methods tpe,random

``--live N`` skips the grid: it runs real simulated studies on the engine's whole default
space (the continuous memory fraction included) and reports the trials to the first feasible
configuration.

The grid tables are cached in the user cache directory (``~/.cache/slotune/tuner_efficiency``
on Linux); delete it after changing the simulator. On a trace without prefix identity (the
Azure traces) the prefix cache never hits, so the two settings of its flag are simulated once.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import statistics
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import platformdirs

from slotune.collector.slo import parse_slos
from slotune.collector.workload import named_workload, retime
from slotune.tuner import sampler as sampler_module
from slotune.tuner.sim.config import Engine
from slotune.tuner.tune.backends import BackendKind
from slotune.tuner.tune.backends.sim import SimBackend
from slotune.tuner.tune.objectives import ObjectiveKind
from slotune.tuner.tune.sampler import make_sampler
from slotune.tuner.tune.space import SearchSpace, default_space, engine_defaults
from slotune.tuner.tune.study import (
    FORCED_ATTR,
    StudySpec,
    build_space,
    is_feasible,
    load_plan,
    objective_fn,
)
from slotune.tuner.tune.trial import TrialRunner, WorkloadPlan

WITHIN = 0.03
CACHE = Path(platformdirs.user_cache_dir("slotune")) / "tuner_efficiency"
AUTO_TUNE_SEQS = (128, 256)
AUTO_TUNE_TOKENS = (512, 1024, 2048, 4096)


@dataclass(frozen=True)
class Scenario:
    name: str
    model: str
    gpu: str
    workload: str
    slos: tuple[str, ...]
    num_requests: int
    tensor_parallel_size: int = 1
    max_model_len: int = 8192
    engine: Engine = Engine.VLLM
    # a narrower grid where each trial is dear (85k-token prompts): these values replace the
    # engine's bench grid's
    narrower: tuple[tuple[str, tuple[Any, ...]], ...] = ()


# TensorRT-LLM's grid narrowed to keep its cost near vLLM's (the default 2048 / 8192 in it)
TRTLLM_NARROWER = (
    ("max_batch_size", (64, 256, 1024, 2048)),
    ("max_num_tokens", (512, 1024, 2048, 4096, 8192)),
)

SCENARIOS = (
    Scenario(
        "8b-h100-azure-conv",
        "llama-3.1-8b",
        "h100-sxm",
        "azure-conv",
        ("ttft:p99<=500ms", "itl:p99<=50ms"),
        150,
    ),
    Scenario(
        "70b-tp4-h100-azure-code",
        "llama-3.1-70b",
        "h100-sxm",
        "azure-code",
        ("ttft:p99<=2s", "itl:p99<=100ms"),
        150,
        tensor_parallel_size=4,
    ),
    Scenario(
        "8b-h100-mooncake-conv",
        "llama-3.1-8b",
        "h100-sxm",
        "mooncake-conversation",
        ("ttft:p99<=10s", "itl:p99<=200ms"),
        100,
        max_model_len=131072,
        narrower=(
            ("max_num_seqs", (64, 256, 1024)),
            ("max_num_batched_tokens", (1024, 2048, 4096, 8192, 16384)),
        ),
    ),
    # Held out: added after the sampler's settings were chosen on the three above.
    Scenario(
        "qwen7b-a100-azure-code",
        "qwen2.5-7b",
        "a100-80gb",
        "azure-code",
        ("ttft:p99<=1s", "itl:p99<=50ms"),
        150,
    ),
    # An infeasible start: TensorRT-LLM's default (chunked prefill off) breaks the ITL SLO at
    # every rate, so the search starts with no feasible point at all.
    Scenario(
        "trtllm-70b-tp4-h100-azure-code",
        "llama-3.1-70b",
        "h100-sxm",
        "azure-code",
        ("ttft:p99<=2s", "itl:p99<=80ms"),
        150,
        tensor_parallel_size=4,
        engine=Engine.TRTLLM,
        narrower=TRTLLM_NARROWER,
    ),
    # A small model on TensorRT-LLM, with a default that meets its SLOs.
    Scenario(
        "trtllm-8b-h100-azure-conv",
        "llama-3.1-8b",
        "h100-sxm",
        "azure-conv",
        ("ttft:p99<=500ms", "itl:p99<=50ms"),
        150,
        engine=Engine.TRTLLM,
        narrower=TRTLLM_NARROWER,
    ),
)

SGLANG_SCENARIOS = (
    Scenario(
        "sglang-8b-h100-azure-conv",
        "llama-3.1-8b",
        "h100-sxm",
        "azure-conv",
        ("ttft:p99<=500ms", "itl:p99<=50ms"),
        150,
        engine=Engine.SGLANG,
    ),
    Scenario(
        "sglang-70b-tp4-h100-azure-code",
        "llama-3.1-70b",
        "h100-sxm",
        "azure-code",
        ("ttft:p99<=2s", "itl:p99<=100ms"),
        150,
        tensor_parallel_size=4,
        engine=Engine.SGLANG,
    ),
)
SCENARIOS = SCENARIOS + SGLANG_SCENARIOS

# The discretised space (every method searches exactly these values).
BENCH_SPACE: dict[str, Any] = {
    "max_num_seqs": [16, 32, 64, 128, 256, 512, 1024],
    "max_num_batched_tokens": [512, 1024, 2048, 4096, 8192, 16384],
    "enable_chunked_prefill": [True, False],
    "enable_prefix_caching": [True, False],
    "long_prefill_token_threshold": [0, 512, 2048],
    "gpu_memory_utilization": None,
}


# The default TensorRT-LLM space's values, the memory fraction left at its default.
TRTLLM_BENCH_SPACE: dict[str, Any] = {
    "max_batch_size": [8, 16, 32, 64, 128, 256, 512, 1024, 2048],
    "max_num_tokens": [512, 1024, 2048, 4096, 8192, 16384, 32768],
    "enable_chunked_prefill": [True, False],
    "kv_cache_config.enable_block_reuse": [True, False],
    "scheduler_config.capacity_scheduler_policy": ["GUARANTEED_NO_EVICT", "MAX_UTILIZATION"],
    "kv_cache_config.free_gpu_memory_fraction": None,
}


# SGLang's default space at grid points (the defaults at an 8192-token context, 4096 running
# and 8192-token chunks, among them, and every point the auto_tune order visits), two
# conservativeness levels; the memory fraction and prefill budget at their defaults.
SGLANG_BENCH_SPACE: dict[str, Any] = {
    "max_running_requests": [32, 128, 256, 1024, 4096],
    "chunked_prefill_size": [-1, 512, 1024, 2048, 4096, 8192],
    "max_prefill_tokens": None,
    "mem_fraction_static": None,
    "schedule_policy": ["fcfs", "lpm"],
    "schedule_conservativeness": [0.3, 1.0],
    "disable_radix_cache": [False, True],
    "enable_mixed_chunk": [False, True],
}

BENCH_SPACES = {
    Engine.VLLM: BENCH_SPACE,
    Engine.TRTLLM: TRTLLM_BENCH_SPACE,
    Engine.SGLANG: SGLANG_BENCH_SPACE,
}
# Each engine's tensor-parallel parameter.
TP_PARAMS = {
    Engine.VLLM: "tensor_parallel_size",
    Engine.TRTLLM: "tensor_parallel_size",
    Engine.SGLANG: "tp_size",
}


def space_of(sc: Scenario) -> SearchSpace:
    defaults = engine_defaults(sc.engine, sc.model, sc.gpu, max_model_len=sc.max_model_len)
    space = default_space(sc.engine, defaults, max_model_len=sc.max_model_len)
    narrower = {k: list(v) for k, v in sc.narrower}
    return space.with_overrides(
        {**BENCH_SPACES[sc.engine], **narrower, TP_PARAMS[sc.engine]: sc.tensor_parallel_size}
    )


def key_of(config: dict[str, Any]) -> str:
    return json.dumps(sorted(config.items()))


Row = tuple[float, bool, dict[str, float]]  # capacity, feasible, constraint values


def _measure(
    args: tuple[Scenario, dict[str, Any]],
) -> tuple[str, float, bool, dict[str, float], float]:
    sc, config = args
    trace = retime(named_workload(sc.workload), num_requests=sc.num_requests)
    runner = TrialRunner(
        SimBackend(sc.engine, sc.model, sc.gpu),
        WorkloadPlan(trace),
        tuple(parse_slos(sc.slos)),
        ObjectiveKind.CAPACITY,
    )
    t0 = time.perf_counter()
    m = runner.measure(config)
    return (
        key_of(config),
        m.values[0],
        m.is_feasible,
        dict(m.constraints),
        time.perf_counter() - t0,
    )


def grid_table(sc: Scenario, jobs: int) -> tuple[dict[str, Row], dict[str, float]]:
    """Capacity, feasibility and constraint values of every grid configuration (cached)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{sc.name}-n{sc.num_requests}-constraints.json"
    if path.exists():
        data = json.loads(path.read_text())
        return {k: (v[0], v[1], v[2]) for k, v in data["table"].items()}, data["timing"]
    space = space_of(sc)
    configs = space.grid()
    # The default itself, where it lies off the grid (SGLang's running limit is unset: the
    # engine derives it from its KV pool).
    default = space.repair(dict(space.defaults))
    if key_of(default) not in {key_of(c) for c in configs}:
        configs.append(default)
    # Without prefix identity in the trace (Azure's), the prefix cache never hits: the two
    # settings of its flag are one simulation, measured once.
    same = _prefix_twin if not _has_prefix_ids(sc) else (lambda c: c)
    unique = list({key_of(same(c)): same(c) for c in configs}.values())
    t0 = time.perf_counter()
    with ProcessPoolExecutor(jobs) as pool:
        results = list(pool.map(_measure, [(sc, c) for c in unique], chunksize=4))
    wall = time.perf_counter() - t0
    measured = {k: (v, ok, cons) for k, v, ok, cons, _ in results}
    table = {key_of(c): measured[key_of(same(c))] for c in configs}
    timing = {
        "configs": len(configs),
        "wall_s": wall,
        "trial_s_mean": statistics.mean(r[4] for r in results),
    }
    path.write_text(json.dumps({"table": {k: list(v) for k, v in table.items()}, "timing": timing}))
    return table, timing


# Settings that change nothing without prefix identity, and the one each stands for: the
# prefix cache flags, and SGLang's lpm (every cached prefix is empty, so it keeps arrival
# order like fcfs).
_PREFIX_TWINS: dict[str, Any] = {
    "enable_prefix_caching": True,
    "kv_cache_config.enable_block_reuse": True,
    "disable_radix_cache": False,
    "schedule_policy": "fcfs",
}


def _has_prefix_ids(sc: Scenario) -> bool:
    return any(r.hash_ids for r in named_workload(sc.workload).requests[: sc.num_requests])


def _prefix_twin(config: dict[str, Any]) -> dict[str, Any]:
    return {k: _PREFIX_TWINS.get(k, v) for k, v in config.items()}


def trials_to_reach(values: list[float], oracle: float) -> int | None:
    """Trials until the best feasible value is within 3 % of ``oracle`` (0: the first
    feasible trial, since an infeasible one counts as 0 and capacity is positive)."""
    best = 0.0
    for i, v in enumerate(values, start=1):
        best = max(best, v)
        if best > 0 and best >= (1 - WITHIN) * oracle:
            return i
    return None


def run_sampler(
    space: SearchSpace,
    table: dict[str, Row],
    sampler: optuna.samplers.BaseSampler,
    budget: int,
    oracle: float,
) -> list[float]:
    """Feasible values in trial order of one study whose objective is a table lookup.

    Each trial carries the constraint values the simulated trial measured (by how much each
    SLO was missed), as in a real study. The study stops once it is within reach of the oracle:
    later trials cannot change the count.
    """
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial(space.default_params())
    found: list[float] = []

    def objective(trial: optuna.Trial) -> float:
        # Trial 0 is the default, with the values the space cannot propose as they are.
        forced = space.forced_defaults() if trial.number == 0 else None
        value, ok, constraints = table[key_of(space.suggest(trial, forced))]
        for name, c in constraints.items():
            trial.set_constraint(name, c)
        found.append(value if ok else 0.0)
        if max(found) >= (1 - WITHIN) * oracle:
            study.stop()
        return value

    study.optimize(objective, n_trials=budget)
    return found


# auto_tune.sh's two parameters, and their TensorRT-LLM counterparts
AUTO_TUNE_PARAMS = {
    Engine.VLLM: ("max_num_seqs", "max_num_batched_tokens"),
    Engine.TRTLLM: ("max_batch_size", "max_num_tokens"),
    Engine.SGLANG: ("max_running_requests", "chunked_prefill_size"),
}


def _studies(
    sc: Scenario, method: str, seeds: range, budget: int, oracle: float, jobs: int
) -> list[list[float]]:
    """Each seed's study of one method, cached with the sampler's source in the key (a
    change to the sampler runs them again; a report over every scenario reuses the rest)."""
    source = hashlib.sha1(inspect.getsource(sampler_module).encode()).hexdigest()[:12]
    path = CACHE / (
        f"{sc.name}-n{sc.num_requests}-{method}-{seeds.start}-{seeds.stop}-b{budget}-{source}.json"
    )
    if path.exists():
        runs: list[list[float]] = json.loads(path.read_text())
        return runs
    with ProcessPoolExecutor(jobs) as pool:
        runs = list(pool.map(_study, [(sc, method, seed, budget, oracle) for seed in seeds]))
    path.write_text(json.dumps(runs))
    return runs


def _study(args: tuple[Scenario, str, int, int, float]) -> list[float]:
    """One seed's study of one method (a worker process reads the cached grid)."""
    sc, method, seed, budget, oracle = args
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore")
    table, _ = grid_table(sc, 1)
    space = space_of(sc)
    return run_sampler(space, table, make_sampler(method, seed, space), budget, oracle)


def auto_tune_order(sc: Scenario, space: SearchSpace, table: dict[str, Row]) -> list[float]:
    seqs_name, tokens_name = AUTO_TUNE_PARAMS[sc.engine]
    out = [_lookup(space, table, {})]
    for seqs in AUTO_TUNE_SEQS:
        for tokens in AUTO_TUNE_TOKENS:
            out.append(_lookup(space, table, {seqs_name: seqs, tokens_name: tokens}))
    return out


def _lookup(space: SearchSpace, table: dict[str, Row], changes: dict[str, Any]) -> float:
    config = space.repair({**space.defaults, **changes})
    value, ok, _ = table.get(key_of(config), (0.0, False, {}))
    return value if ok else 0.0


def live_first_feasible(
    sc: Scenario, method: str, seeds: range, budget: int, num_requests: int
) -> list[int | None]:
    """Trials to the first feasible configuration of real simulated studies on the engine's
    whole default space (continuous memory fraction included), one per seed: no grid, every
    trial simulated (the seed also draws the arrivals)."""
    spec = StudySpec(
        sc.name,
        BackendKind.SIM,
        sc.engine,
        sc.model,
        sc.gpu,
        sc.workload,
        None,
        sc.slos,
        num_requests=num_requests,
        space={TP_PARAMS[sc.engine]: sc.tensor_parallel_size},
    )
    plan = load_plan(spec)
    space = build_space(spec, plan)
    runner = TrialRunner(
        SimBackend(sc.engine, sc.model, sc.gpu),
        plan,
        tuple(parse_slos(sc.slos)),
        ObjectiveKind.CAPACITY,
    )
    out: list[int | None] = []
    for seed in seeds:
        study = optuna.create_study(
            direction="maximize",
            sampler=make_sampler(method, seed, space, forced_attr=FORCED_ATTR),
        )
        study.enqueue_trial(
            space.default_params(), user_attrs={FORCED_ATTR: space.forced_defaults()}
        )
        objective = objective_fn(runner, space, seed)
        first = None
        for i in range(1, budget + 1):
            study.optimize(objective, n_trials=1)
            if is_feasible(study.trials[-1]):
                first = i
                break
        out.append(first)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds first-seed .. first-seed+seeds-1 (another range: a held-out check)",
    )
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--scenario", action="append", help="only these scenario names")
    # Names of tuner.tune.sampler.make_sampler: "tpe" is what `slotune tune` uses. GPSampler needs
    # PyTorch, which slotune does not depend on: add "gp" where it is installed.
    ap.add_argument("--methods", default="tpe,optuna-tpe,random")
    ap.add_argument(
        "--live",
        type=int,
        metavar="N",
        help="instead of the grid: trials to the first feasible configuration of real "
        "simulated studies on the whole default space, N requests per run",
    )
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore")
    if args.live:
        _print_live(args)
        return
    rows = []
    for sc in SCENARIOS:
        if args.scenario and sc.name not in args.scenario:
            continue
        table, timing = grid_table(sc, args.jobs)
        space = space_of(sc)
        feasible = [v for v, ok, _ in table.values() if ok]
        oracle = max(feasible) if feasible else 0.0
        default = _lookup(space, table, {})
        row: dict[str, Any] = {
            "sc": sc,
            "scenario": sc.name,
            "configs": timing["configs"],
            "grid_wall_s": timing["wall_s"],
            "trial_s": timing["trial_s_mean"],
            "oracle": oracle,
            "default": default,
            "best_over_default": oracle / default if default else None,
        }
        for method in args.methods.split(","):
            t0 = time.perf_counter()
            seeds = range(args.first_seed, args.first_seed + args.seeds)
            runs = _studies(sc, method, seeds, args.budget, oracle, args.jobs)
            reach = [trials_to_reach(found, oracle) for found in runs]
            first = [trials_to_reach(found, 0.0) for found in runs]
            row[method] = _median(reach, args.budget)
            row[f"{method}_reached"] = sum(r is not None for r in reach)
            row[f"{method}_first_feasible"] = _median(first, args.budget)
            row[f"{method}_s"] = time.perf_counter() - t0
        row["auto_tune"] = trials_to_reach(auto_tune_order(sc, space, table), oracle)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "sc"}), file=sys.stderr)
    report = _report(rows, args)
    print(report)
    if not args.scenario:
        REPORT.write_text(report)


def _print_live(args: argparse.Namespace) -> None:
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(
        f"median trials (trial 0 included) to the first configuration meeting every SLO, "
        f"whole default space, {args.live} requests per run, budget {args.budget}, seeds "
        f"{seeds.start}...{seeds.stop - 1}\n"
    )
    print(" | ".join(["scenario", *args.methods.split(",")]))
    print(" | ".join("---" for _ in range(len(args.methods.split(",")) + 1)))
    for sc in SCENARIOS:
        if args.scenario and sc.name not in args.scenario:
            continue
        cells = [sc.name]
        for method in args.methods.split(","):
            first = live_first_feasible(sc, method, seeds, args.budget, args.live)
            print(
                json.dumps({"scenario": sc.name, "method": method, "first": first}), file=sys.stderr
            )
            cells.append(
                f"{_fmt(_median(first, args.budget))} ({sum(f is not None for f in first)})"
            )
        print(" | ".join(cells))


def _median(reach: list[int | None], budget: int) -> float | None:
    """Median with 'never' counted as worse than the budget (None if most never got there)."""
    ranked = sorted(r if r is not None else budget + 1 for r in reach)
    m = statistics.median(ranked)
    return None if m > budget else m


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if isinstance(x, float) else str(x)


PEERS = ("optuna-tpe", "random", "auto_tune")
REPORT = Path(__file__).with_name("tuner_efficiency.md")

_INTRO = """\
# slotune's sampler against its peers

Written by `benchmarks/tuner_efficiency.py` from its own output; do not edit (run the command
at the end to regenerate it). The sampler itself is described in `tuner/tune/sampler.py` and
`docs/tune.md`.

For each scenario the simulator measured the capacity (the highest request rate with every
SLO holding, found by the max-rate search) of *every* configuration of a discretised space:
that exhaustive grid is the oracle. Each search method then runs as an Optuna study whose
objective looks its trials up in that table (value and the SLO constraint values the real
trial carried), starting from the engine's default configuration as trial 0. Methods:
`tpe`, slotune's sampler (what `slotune tune` uses); `optuna-tpe`, Optuna's
`TPESampler(multivariate=True, n_startup_trials=5)`; `random`, Optuna's random search;
`auto_tune`, the order of vLLM's `auto_tune.sh` (the default, then `max_num_seqs` 128/256 x
`max_num_batched_tokens` 512...4096 in its nested loops; TensorRT-LLM's `max_batch_size` x
`max_num_tokens` likewise), one order for every seed. The figure is the median over the seeds
of the number of trials (trial 0 included) until the best feasible value found is within
{within:.0%} of the oracle.
"""


def _report(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    methods = args.methods.split(",")
    seeds = f"{args.first_seed}...{args.first_seed + args.seeds - 1}"
    out = [_INTRO.format(within=WITHIN), "## Scenarios\n"]
    out += [
        "scenario | engine | model | GPU | workload | requests | SLOs | configurations | "
        "oracle req/s | default req/s",
        "---|---|---|---|---|---|---|---|---|---",
    ]
    for r in rows:
        sc: Scenario = r["sc"]
        gpu = sc.gpu + (f" x{sc.tensor_parallel_size} (TP)" if sc.tensor_parallel_size > 1 else "")
        default = _fmt(r["default"]) if r["default"] else "infeasible"
        out.append(
            f"{sc.name} | {sc.engine.value} | {sc.model} | {gpu} | {sc.workload} | "
            f"{sc.num_requests} | {', '.join(sc.slos)} | {r['configs']} | "
            f"{_fmt(r['oracle'])} | {default}"
        )
    out += [
        f"\n## Trials to within {WITHIN:.0%} of the oracle\n",
        f"Median over seeds {seeds} (budget {args.budget}; in brackets the seeds that got "
        "there; '-' = most never did). The last column compares slotune's median with the "
        "best of its peers'.\n",
        " | ".join(["scenario", *methods, "auto_tune", "tpe <= best peer"]),
        "|".join("---" for _ in range(len(methods) + 3)),
    ]
    verdicts = []
    for r in rows:
        cells = [r["scenario"]]
        cells += [f"{_fmt(r[m])} ({r[f'{m}_reached']}/{args.seeds})" for m in methods]
        cells.append(_fmt(r["auto_tune"]))
        peers = [_rank(r.get(m), args.budget) for m in PEERS if m in r]
        ok = bool(peers) and _rank(r.get("tpe"), args.budget) <= min(peers)
        verdicts.append(ok)
        cells.append("yes" if ok else "**no**")
        out.append(" | ".join(cells))
    out += [
        "\n## Trials to the first configuration meeting every SLO\n",
        "Median (trial 1 when the default does).\n",
        " | ".join(["scenario", *methods]),
        "|".join("---" for _ in range(len(methods) + 1)),
    ]
    for r in rows:
        out.append(" | ".join([r["scenario"], *(_fmt(r[f"{m}_first_feasible"]) for m in methods)]))
    out += [
        f"\nslotune's sampler is at or below the best peer in {sum(verdicts)} of "
        f"{len(verdicts)} scenarios.\n",
        "```console",
        f"$ .venv/bin/python benchmarks/tuner_efficiency.py --seeds {args.seeds} "
        f"--first-seed {args.first_seed} --budget {args.budget} --methods {args.methods}",
        "```",
        "",
        "The grid tables are cached in the user cache directory "
        "(`~/.cache/slotune/tuner_efficiency` on Linux); delete them after changing the "
        "simulator. Grid cost on the machine that wrote this file (wall s, mean s per "
        "capacity trial): "
        + "; ".join(f"{r['scenario']} {r['grid_wall_s']:.0f} / {r['trial_s']:.2f}" for r in rows)
        + ".",
        "",
    ]
    return "\n".join(out)


def _rank(median: float | None, budget: int) -> float:
    return budget + 1 if median is None else median


if __name__ == "__main__":
    main()
