"""How well ``slotune sim calibrate`` carries over to requests it did not fit.

``--real`` (the evidence): real vLLM CPU runs checked in under ``benchmarks/data/vllm-cpu``
(two captures at 2, 6, 12 and 40 req/s, see its README): calibrate on one rate, predict the
other rates, before (bundled ``host-cpu`` entry) and after. Targets on the predicted runs:
TPOT and E2E mean within 10 %, TTFT mean within 20 %, p90s within 25 % (a score <= 1, see
``tuner/sim/calibration/objective.py``).

``--silicon FILE``: the closed-loop H100 rows of an AIConfigurator silicon CSV
(``../shared/data/measurements/``), per engine x model x precision, in three splits: fit on
the low-concurrency rows (<= 16) and predict the rest; fit on the most common input/output
length pair and predict the others; fit on the smallest tensor-parallel size and predict the
others. As ``slotune sim calibrate --silicon`` decides, the fit is kept ("written") only when
it beats the uncalibrated model on a third of the fitted rows held back from it; the
predicted rows are never seen. Targets on the predicted rows: never worse than uncalibrated,
median |error| within 8 % TPOT / 12 % TTFT.

``--design``: DESIGN's published H100 point (Llama-2-7B, vLLM 0.15.1): calibrate on the
5 req/s means and predict the 10 req/s means.

Default (a unit check of the fit, not evidence): "measured" requests come from the
simulator run with hidden, perturbed hardware factors plus 3 % per-request noise; the first
third is fitted, the rest predicted.

Prints figures; asserts nothing.

    .venv/bin/python benchmarks/sim_calibration.py [--real] [--design] [--requests 900]
    .venv/bin/python benchmarks/sim_calibration.py --silicon ../shared/data/measurements/aiconfigurator_silicon_h100.csv
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from pathlib import Path

from sim_fidelity import Point, published_points

from slotune.collector.observed import ObservedRequest, observed_lines, read_observed
from slotune.collector.workload import retime
from slotune.collector.workload.synthetic import Column, parse_length_spec, synthetic_trace
from slotune.tuner.sim import VllmConfig
from slotune.tuner.sim.calibration.measured import calibrate, simulated_errors
from slotune.tuner.sim.calibration.objective import Errors
from slotune.tuner.sim.catalog import Efficiency, StepTerms, load_catalog_file
from slotune.tuner.sim.config import ResolvedConfig, resolve
from slotune.tuner.sim.engine import EngineCore
from slotune.tuner.sim.simulator import replay

DATA = Path(__file__).parent / "data" / "vllm-cpu"
RATES = (2, 6, 12, 40)
# (model, gpu, tensor-parallel size, request rate, hidden factors of the "real" GPU)
CASES = (
    ("llama-3.1-8b", "rtx-4090", 1, 2.0, Efficiency(0.6, 0.75, 1.0, 2.5e-3, 0.0)),
    ("qwen3-32b", "rtx-pro-6000", 2, 1.0, Efficiency(0.8, 0.85, 0.45, 2.0e-3, 40e-6)),
    ("llama-3.1-70b", "h100-sxm", 4, 2.0, Efficiency(1.1, 0.9, 0.7, 1.2e-3, 10e-6)),
)


def _fmt(e: Errors | None) -> str:
    if e is None:
        return "-"
    return (
        f"TTFT {e.ttft:+6.1%} TPOT {e.tpot:+6.1%} E2E {e.e2e:+6.1%} | p90 {e.ttft_p90:+6.1%} "
        f"{e.tpot_p90:+6.1%} {e.e2e_p90:+6.1%} | score {e.score:5.2f}"
    )


def _perturbed(
    config: ResolvedConfig, hidden: Efficiency, rate: float, n: int, seed: int
) -> list[ObservedRequest]:
    trace = synthetic_trace(
        parse_length_spec("lognormal:6.5,0.8"),
        parse_length_spec("lognormal:5.0,0.7", column=Column.OUTPUT, field_name="--output-len"),
        n,
        seed=seed,
    )
    trace = retime(trace, rate=rate, seed=seed)
    real = dataclasses.replace(config, gpu=dataclasses.replace(config.gpu, efficiency=hidden))
    rng = random.Random(seed)
    out = []
    for i, d in enumerate(observed_lines(replay(EngineCore.create(real), trace).records)):
        ttft = d["ttft_ms"] * (1 + rng.gauss(0, 0.03))
        e2e = max(ttft, d["e2e_ms"] * (1 + rng.gauss(0, 0.03)))
        tpot = (e2e - ttft) / (d["output_tokens"] - 1) if d["output_tokens"] > 1 else None
        out.append(
            ObservedRequest(
                d["timestamp"], d["input_tokens"], d["output_tokens"], ttft, e2e, tpot, line=i + 1
            )
        )
    return out


def _terms(terms: StepTerms, sd: StepTerms) -> str:
    return ", ".join(
        f"{f.name} {getattr(terms, f.name):+.3g} ± {getattr(sd, f.name):.2g}"
        for f in dataclasses.fields(StepTerms)
    )


def perturbed(requests: int, seed: int) -> None:
    for model, gpu, tp, rate, hidden in CASES:
        config = resolve(
            VllmConfig(model=model, gpu=gpu, tensor_parallel_size=tp, max_model_len=8192)
        )
        observed = _perturbed(config, hidden, rate, requests, seed)
        c0 = time.process_time()
        report = calibrate(config, observed, fitted_on="perturbed simulation")
        cpu = time.process_time() - c0
        print(f"{model} / {gpu} TP{tp} at {rate} req/s, {len(observed)} requests ({cpu:.0f} s CPU)")
        print(f"  hidden: {hidden}")
        print(f"  fitted: {_terms(report.fit.terms, report.fit.sd)}")
        print(f"  held back ({report.num_held_out}) before: {_fmt(report.held_out_before)}")
        print(f"  held back ({report.num_held_out}) after:  {_fmt(report.held_out_after)}")


def real() -> None:
    load_catalog_file(DATA / "catalog.yaml")
    config = resolve(
        VllmConfig(
            model="tiny-llama",
            gpu="host-cpu",
            max_model_len=2048,
            max_num_seqs=16,
            max_num_batched_tokens=2048,
            enforce_eager=True,
        )
    )
    for capture in ("a", "b"):
        runs = {r: read_observed(DATA / capture / f"rate-{r}.jsonl") for r in RATES}
        for fit_rate in RATES:
            c0 = time.process_time()
            report = calibrate(
                config, runs[fit_rate], fitted_on=f"{capture}/{fit_rate}", fit_fraction=1.0
            )
            cpu = time.process_time() - c0
            fitted = dataclasses.replace(
                config, gpu=dataclasses.replace(config.gpu, efficiency=report.efficiency)
            )
            print(
                f"capture {capture}, fitted on {fit_rate} req/s ({cpu:.1f} s CPU): "
                f"{_terms(report.fit.terms, report.fit.sd)}"
            )
            for rate in RATES:
                before = simulated_errors(config, runs[rate])
                after = simulated_errors(fitted, runs[rate])
                tag = "fitted " if rate == fit_rate else "predict"
                print(f"  {tag} {rate:>2} req/s before: {_fmt(before)}")
                print(f"  {tag} {rate:>2} req/s after:  {_fmt(after)}")


def _published(point: Point, n: int, seed: int) -> list[ObservedRequest]:
    """Requests at the point's lengths (the output length its means imply) and rate, each
    'measured' at the published means."""
    trace = retime(
        synthetic_trace(
            parse_length_spec(f"normal:{point.input_tokens},100"),
            parse_length_spec(
                f"normal:{point.implied_output_tokens},40",
                column=Column.OUTPUT,
                field_name="--output-len",
            ),
            n,
            seed=seed,
        ),
        rate=point.rate,
        seed=seed,
    )
    ttft, itl = point.ttft_ms, point.itl_ms
    return [
        ObservedRequest(
            r.timestamp_s,
            r.input_tokens,
            r.output_tokens,
            ttft,
            ttft + itl * (r.output_tokens - 1),
            itl,
            line=i + 1,
        )
        for i, r in enumerate(trace.requests)
    ]


def design(seed: int) -> None:
    """Fit on the first Llama-2-7B point (5 req/s), predict the other (10 req/s); the 70B
    point has another model and an unpublished rate, so it is not used."""
    fit_point, other = published_points()[:2]
    config = resolve(fit_point.config)
    fit_on = _published(fit_point, 600, seed)
    # Only the run's means are published: one fitted mean per metric.
    report = calibrate(
        config, fit_on, fitted_on=fit_point.name, fit_fraction=1.0, group_size=len(fit_on)
    )
    fitted = dataclasses.replace(
        config, gpu=dataclasses.replace(config.gpu, efficiency=report.efficiency)
    )
    print(f"{fit_point.name}, fitted: {_terms(report.fit.terms, report.fit.sd)}")
    for point in (fit_point, other):
        observed = _published(point, 1200, seed + 1)
        for when, cfg in (("before", config), ("after", fitted)):
            e = simulated_errors(cfg, observed)
            print(
                f"  {point.name} {when:<6}: TTFT {e.ttft:+6.1%}  TPOT (ITL) {e.tpot:+6.1%}  "
                f"E2E {e.e2e:+6.1%}  (means; p90s not published)"
            )


def silicon(path: Path) -> None:
    """The three splits of ``--silicon`` (module docstring)."""
    from collections import Counter, defaultdict

    from slotune.collector.silicon import read_silicon
    from slotune.tuner.sim.calibration.silicon_fit import (
        MIN_FIT_ROWS,
        calibrate_silicon,
        row_errors,
    )
    from slotune.tuner.sim.silicon import SiliconCase, silicon_case

    groups: dict[str, list[SiliconCase]] = defaultdict(list)
    for row in read_silicon(path):
        case = silicon_case(row)
        if not isinstance(case, str):
            model = row.model_path.rsplit("/", 1)[-1]
            groups[f"{row.engine} {model} {row.precision}"].append(case)

    def by_lengths(cases: list[SiliconCase]) -> tuple[list[SiliconCase], list[SiliconCase]]:
        common = Counter((c.row.input_tokens, c.row.output_tokens) for c in cases)
        pair = common.most_common(1)[0][0]
        fit = [c for c in cases if (c.row.input_tokens, c.row.output_tokens) == pair]
        return fit, [c for c in cases if c not in fit]

    def by_tp(cases: list[SiliconCase]) -> tuple[list[SiliconCase], list[SiliconCase]]:
        smallest = min(c.row.tensor_parallel_size for c in cases)
        fit = [c for c in cases if c.row.tensor_parallel_size == smallest]
        return fit, [c for c in cases if c not in fit]

    def by_concurrency(cases: list[SiliconCase]) -> tuple[list[SiliconCase], list[SiliconCase]]:
        return (
            [c for c in cases if c.row.concurrency <= 16],
            [c for c in cases if c.row.concurrency > 16],
        )

    splits = (
        ("low -> high concurrency", by_concurrency),
        ("one ISL/OSL -> others", by_lengths),
        ("smallest TP -> others", by_tp),
    )
    print(
        f"{'group':34} {'split':24} {'fit':>4} {'pred':>4} | {'uncalibrated TTFT TPOT':>22} | "
        f"{'calibrated TTFT TPOT':>22} | written"
    )
    for name, cases in sorted(groups.items()):
        for label, split in splits:
            fit, predicted = split(cases)
            if len(fit) < 2 * MIN_FIT_ROWS or not predicted:
                print(f"{name:34} {label:24} too few rows ({len(fit)} to fit, {len(predicted)})")
                continue
            start = time.process_time()
            outcome = calibrate_silicon([c for i, c in enumerate(fit) if i % 3], fit[::3])
            before = row_errors(predicted, StepTerms())
            after = row_errors(predicted, outcome.terms) if outcome.is_better else before
            print(
                f"{name:34} {label:24} {len(fit):4} {len(predicted):4} | "
                f"{before.ttft_pct:10.1f} {before.tpot_pct:10.1f}  | "
                f"{after.ttft_pct:10.1f} {after.tpot_pct:10.1f}  | "
                f"{'yes' if outcome.is_better else 'no'} ({time.process_time() - start:.0f} CPU-s)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", action="store_true", help="the real vLLM CPU runs")
    parser.add_argument("--design", action="store_true", help="DESIGN's published points")
    parser.add_argument("--silicon", type=Path, help="an AIConfigurator silicon CSV")
    parser.add_argument("--requests", type=int, default=900)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.silicon is not None:
        silicon(args.silicon)
        return
    if args.real:
        real()
    if args.design:
        design(args.seed)
    if not (args.real or args.design):
        perturbed(args.requests, args.seed)


if __name__ == "__main__":
    main()
