"""End-to-end fidelity: simulated vs published real vLLM measurements (DESIGN's points).

Published points (inference-sim/sim-to-real-accuracy-validation, error_records.csv, the
"actual" column), vLLM on H100:

- Llama-2-7B TP1 fp16, ``max_num_batched_tokens`` 2048, ``max_num_seqs`` 128, prefix caching
  and chunked prefill on, ~566 input / ~247 output tokens, Poisson arrivals at 5 and 10 req/s.
- Llama-3.1-70B-Instruct TP4, ``max_num_batched_tokens`` 8192, "moderate load" (the rate and
  input length are not published with the means; this script assumes 566 input tokens at
  ``--rate-70b`` req/s, 2 by default).

Each point runs twice: with the nominal output length, and with the output length implied by
the published means themselves, ``1 + (E2E - TTFT) / ITL`` (the real runs' E2E means only
fit ~195 generated tokens per request at the published ITL, i.e. requests ended before the
nominal 247). The simulator always generates exactly the requested tokens, so the implied
length is the like-for-like comparison. Targets: |error| <= 15 % for E2E and ITL, <= 25 % for
TTFT. Prints figures; asserts nothing.

With ``--silicon FILE`` it checks closed-loop runs instead: every row of an AIConfigurator
silicon CSV (``../shared/data/measurements/``) that slotune can model is simulated with the
row's engine, model, precision, tensor-parallel size, lengths and concurrency, and
AIConfigurator's own estimate of the same row runs beside it (its own virtual environment,
``.venv-aic``: ``python3 -m venv .venv-aic && .venv-aic/bin/pip install aiconfigurator``, or
``SLOTUNE_AIC_PYTHON``). It prints the error table by engine x model x TP x concurrency band,
lists the rows it cannot model with the reason, and writes ``benchmarks/results/
sim_fidelity_silicon.csv`` (every row), ``.txt`` (the table) and ``.png`` (predicted against
measured; needs ``pip install 'slotune[bench]'``).

    .venv/bin/python benchmarks/sim_fidelity.py [--requests 2000] [--seed 0] [--rate-70b 2]
    .venv/bin/python benchmarks/sim_fidelity.py --silicon ../shared/data/measurements/aiconfigurator_silicon_h100.csv
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from slotune.tuner.sim import VllmConfig, simulate
from slotune.tuner.sim.simulator import load_workload

TARGET_PCT = {"e2e": 15.0, "ttft": 25.0, "itl": 15.0}


@dataclass(frozen=True)
class Point:
    name: str
    config: VllmConfig
    rate: float
    input_tokens: int
    output_tokens: int
    e2e_ms: float
    ttft_ms: float
    itl_ms: float

    @property
    def implied_output_tokens(self) -> int:
        return round(1 + (self.e2e_ms - self.ttft_ms) / self.itl_ms)


def published_points(rate_70b: float = 2.0) -> list[Point]:
    """DESIGN's published points (the 70B point at an assumed rate)."""
    l7b = VllmConfig(
        model="llama-2-7b",
        gpu="h100-sxm",
        max_num_batched_tokens=2048,
        max_num_seqs=128,
        enable_prefix_caching=True,
        enable_chunked_prefill=True,
    )
    l70b = VllmConfig(
        model="llama-3.1-70b", gpu="h100-sxm", tensor_parallel_size=4, max_num_batched_tokens=8192
    )
    return [
        Point("H100 Llama-2-7B TP1, 5 req/s", l7b, 5.0, 566, 247, 1810.0, 25.0, 9.3),
        Point("H100 Llama-2-7B TP1, 10 req/s", l7b, 10.0, 566, 247, 2216.0, 29.5, 11.2),
        Point(
            f"H100x4 Llama-3.1-70B TP4, {rate_70b:g} req/s (assumed)",
            l70b,
            rate_70b,
            566,
            247,
            4502.0,
            53.7,
            18.3,
        ),
    ]


def _run(point: Point, output_tokens: int, requests: int, seed: int) -> dict[str, float]:
    trace = load_workload(
        input_len=str(point.input_tokens),
        output_len=str(output_tokens),
        num_requests=requests,
        rate=point.rate,
        seed=seed,
    )
    summary = simulate(point.config, trace).summary.to_dict()
    return {m: summary[f"{m}_ms"]["mean"] for m in ("e2e", "ttft", "itl")}


def silicon(path: Path, aic_python: Path | None) -> None:
    """The closed-loop check over a silicon CSV (see the module docstring)."""
    import _silicon

    start = time.process_time()
    compared, skipped = _silicon.compare(path, aic_python=aic_python)
    cpu_s = time.process_time() - start
    lines = _silicon.table(compared)
    lines.append("")
    lines.append(f"{len(compared)} rows modelled, {len(skipped)} not (reason: rows):")
    lines += [f"  {reason}: {n}" for reason, n in Counter(r for _, r in skipped).most_common()]
    lines.append(f"slotune CPU time for {len(compared)} rows: {cpu_s:.1f} s (AIC's included)")
    print("\n".join(lines))
    _silicon.RESULTS.mkdir(exist_ok=True)
    stem = _silicon.RESULTS / "sim_fidelity_silicon"
    stem.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    _silicon.write_rows(compared, skipped, stem.with_suffix(".csv"))
    plotted = _silicon.plot(compared, stem.with_suffix(".png"))
    print(
        f"wrote {stem}.txt, .csv"
        + (", .png" if plotted else " (no plot: pip install 'slotune[bench]')")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate-70b", type=float, default=2.0)
    parser.add_argument("--silicon", type=Path, help="an AIConfigurator silicon CSV to check")
    parser.add_argument("--aic-python", type=Path, help="the Python of AIConfigurator's venv")
    args = parser.parse_args()
    if args.silicon is not None:
        silicon(args.silicon, args.aic_python)
        return
    print(
        f"{'point':44} {'output':>10} {'metric':>6} {'published':>10} {'simulated':>10} "
        f"{'error':>8}  target"
    )
    errors: dict[str, list[float]] = {"nominal": [], "implied": []}
    for point in published_points(args.rate_70b):
        for label, out in (
            ("nominal", point.output_tokens),
            ("implied", point.implied_output_tokens),
        ):
            sim = _run(point, out, args.requests, args.seed)
            for metric, published in (
                ("e2e", point.e2e_ms),
                ("ttft", point.ttft_ms),
                ("itl", point.itl_ms),
            ):
                err = 100.0 * (sim[metric] - published) / published
                errors[label].append(abs(err))
                ok = "ok" if abs(err) <= TARGET_PCT[metric] else "MISS"
                print(
                    f"{point.name:44} {label + ' ' + str(out):>10} {metric:>6} "
                    f"{published:10.1f} {sim[metric]:10.1f} {err:+7.1f}%  "
                    f"<={TARGET_PCT[metric]:.0f}% {ok}"
                )
    for label, values in errors.items():
        print(f"mean |error| with {label} output lengths: {sum(values) / len(values):.1f} %")


if __name__ == "__main__":
    main()
