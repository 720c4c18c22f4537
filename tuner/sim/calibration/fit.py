"""Fits the cost model's coefficients to measured operator timings and reports the error.

Usage::

    python -m tuner.sim.calibration.fit --profiling /path/to/profiling

``--profiling`` is a directory in Vidur's ``data/profiling`` layout (``compute/<gpu>/...`` and
``network/<gpu>_dgx/...``). The fit writes the coefficients to the bundled
``tuner/sim/catalog/calibration.yaml`` (or ``--output``) and the MAPE tables into
``docs/simulator-calibration.md`` (or ``--report``), between its report markers.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from slotune.collector.errors import SlotuneError
from slotune.tuner.sim.calibration._data import (
    AllReduceSamples,
    OpSamples,
    load_all_reduce,
    load_compute,
)
from slotune.tuner.sim.calibration._model import (
    fit_all_reduce,
    fit_elementwise,
    fit_gemm,
    mape,
    predict_all_reduce,
    predict_elementwise,
    predict_gemm,
)
from slotune.tuner.sim.calibration._report import Predict, group_table, op_table, write_report
from slotune.tuner.sim.catalog import GPU, get_gpu
from slotune.tuner.sim.cost_coeffs import ELEMENTWISE_OPS, FamilyCoeffs
from slotune.tuner.sim.cost_ops import GEMM_OPS

_REPO_ROOT = Path(__file__).resolve().parents[3]
_DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "catalog" / "calibration.yaml"
_DEFAULT_REPORT = _REPO_ROOT / "docs" / "simulator-calibration.md"
_DEFAULT_REFERENCES = ("a100=a100-80gb", "h100=h100-sxm")
_DATA_SOURCE = "microsoft/vidur @ 7d47513, data/profiling (MIT)"


def _fit_family(
    compute: list[OpSamples], network: list[AllReduceSamples], gpu: GPU
) -> FamilyCoeffs:
    gemm = fit_gemm([s for s in compute if s.op in GEMM_OPS], gpu)
    elementwise = {
        op: fit_elementwise([s for s in compute if s.op == op], gpu) for op in ELEMENTWISE_OPS
    }
    return FamilyCoeffs(gemm, elementwise, fit_all_reduce(network, gpu))


def _predictor(fitted: dict[str, FamilyCoeffs], gpus: dict[str, GPU]) -> Predict:
    def predict(s: OpSamples) -> np.ndarray:
        fam, gpu = fitted[s.family], gpus[s.family]
        if s.op in GEMM_OPS:
            return predict_gemm(s, gpu, fam.gemm)
        return predict_elementwise(s, gpu, fam.elementwise[s.op])

    return predict


def _family_doc(fam: FamilyCoeffs, gpu: GPU) -> dict[str, Any]:
    return {
        "reference_gpu": gpu.id,
        "gemm": {
            "compute_eff": fam.gemm.compute_eff,
            "memory_eff": fam.gemm.memory_eff,
            "smoothing_p": fam.gemm.smoothing_p,
            "latency_s": fam.gemm.latency_s,
        },
        "elementwise": {
            op: {"memory_eff": c.memory_eff, "row_eff": c.row_eff, "latency_s": c.latency_s}
            for op, c in fam.elementwise.items()
        },
        "all_reduce": {
            "latency_s": dict(fam.all_reduce.latency_s),
            "bus_bw_eff": dict(fam.all_reduce.bus_bw_eff),
        },
    }


def _held_out_rows(compute: list[OpSamples], gpus: dict[str, GPU]) -> list[str]:
    """Linear-layer MAPE on each model with the roofline fitted to the other models only."""
    rows = ["| GPU | held-out model | fitted on | linear layers MAPE % |", "|---|---|---|---|"]
    for family, gpu in gpus.items():
        gemms = [s for s in compute if s.family == family and s.op in GEMM_OPS]
        for model in sorted({s.model for s in gemms}):
            train = [s for s in gemms if s.model != model]
            if not train:
                continue
            coeffs = fit_gemm(train, gpu)
            test = [s for s in gemms if s.model == model]
            pred = np.concatenate([predict_gemm(s, gpu, coeffs) for s in test])
            measured = np.concatenate([s.measured_s for s in test])
            others = ", ".join(sorted({s.model for s in train}))
            rows.append(f"| {family} | {model} | {others} | {mape(pred, measured):.1f} |")
    return rows


def _report_body(
    compute: list[OpSamples],
    network: list[AllReduceSamples],
    fitted: dict[str, FamilyCoeffs],
    gpus: dict[str, GPU],
) -> list[str]:
    predict = _predictor(fitted, gpus)
    groups: dict[tuple[str, str, str], list[OpSamples]] = defaultdict(list)
    for s in compute:
        groups[(s.family, s.model, "linear" if s.op in GEMM_OPS else "memory-bound")].append(s)
        groups[(s.family, s.model, "layer total")].append(s)
    ar_rows = ["| GPU | workers | MAPE % | points |", "|---|---|---|---|"]
    for ar in network:
        pred = predict_all_reduce(ar, gpus[ar.family], fitted[ar.family].all_reduce)
        ar_rows.append(
            f"| {ar.family} | {ar.num_workers} | {mape(pred, ar.measured_s):.1f} | "
            f"{len(ar.size_bytes)} |"
        )
    all_pred = np.concatenate([predict(s) for s in compute])
    all_measured = np.concatenate([s.measured_s for s in compute])
    return [
        f"Generated on {date.today().isoformat()} by `python -m tuner.sim.calibration.fit "
        f"--profiling <dir>` from {_DATA_SOURCE}. MAPE = mean |predicted − measured| / "
        "measured over every token count (and tensor-parallel size) in the data, in percent.",
        "",
        f"Overall operator MAPE: **{mape(all_pred, all_measured):.1f} %** over "
        f"{len(all_measured)} measurements.",
        "",
        "### Operator groups by token count (sum of the group's operators per point)",
        "",
        *group_table(dict(groups), predict),
        "",
        "### Linear layers on a model left out of the fit",
        "",
        *_held_out_rows(compute, gpus),
        "",
        "### Tensor-parallel all-reduce (one node)",
        "",
        *ar_rows,
        "",
        "### Every operator, by tensor-parallel size",
        "",
        *op_table(compute, predict),
    ]


def run(profiling: Path, output: Path, report: Path | None, references: list[str]) -> None:
    """Fits every GPU family found in ``profiling`` and writes coefficients and report."""
    gpus = {}
    for ref in references:
        family, _, gpu_id = ref.partition("=")
        gpus[family] = get_gpu(gpu_id)
    compute = [s for s in load_compute(profiling) if s.family in gpus]
    network = [s for s in load_all_reduce(profiling) if s.family in gpus]
    fitted = {
        family: _fit_family(
            [s for s in compute if s.family == family],
            [s for s in network if s.family == family],
            gpu,
        )
        for family, gpu in gpus.items()
    }
    doc = {
        "source": f"fitted by `python -m tuner.sim.calibration.fit` to {_DATA_SOURCE} "
        "operator timings (median ms per layer) and one-node all-reduce timings",
        "generated": date.today().isoformat(),
        "default_family": "h100" if "h100" in fitted else sorted(fitted)[0],
        "families": {f: _family_doc(c, gpus[f]) for f, c in fitted.items()},
    }
    header = (
        "# Generated by `python -m tuner.sim.calibration.fit`; rerun it instead of "
        "editing.\n# Formulas: tuner/sim/cost_ops.py; method: "
        "docs/simulator-calibration.md.\n"
    )
    output.write_text(header + yaml.safe_dump(doc, sort_keys=False), "utf-8")
    body = _report_body(compute, network, fitted, gpus)
    if report is not None:
        write_report(report, body)
    print("\n".join(body))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tuner.sim.calibration.fit", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--profiling",
        type=Path,
        required=True,
        help="directory with compute/ and network/ profiling data",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=_DEFAULT_OUTPUT,
        help="where to write the fitted coefficients (YAML)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        default=_DEFAULT_REPORT,
        help="Markdown document whose report section is replaced",
    )
    parser.add_argument("--no-report", action="store_true", help="print the report only")
    parser.add_argument(
        "--reference",
        action="append",
        default=None,
        metavar="DIR=GPU_ID",
        help="profiling GPU directory and the catalog GPU it was measured on "
        f"(default: {' '.join(_DEFAULT_REFERENCES)})",
    )
    args = parser.parse_args(argv)
    try:
        run(
            args.profiling,
            args.output,
            None if args.no_report else args.report,
            args.reference or list(_DEFAULT_REFERENCES),
        )
    except SlotuneError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
