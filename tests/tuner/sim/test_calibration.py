"""The fitting script on a small profiling directory in Vidur's layout, generated from known
coefficients (the fit must recover them and write files the cost model loads), and the bundled
calibration against a sample of the real timings."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from slotune.tuner.sim.calibration import fit
from slotune.tuner.sim.calibration._data import load_all_reduce, load_compute
from slotune.tuner.sim.calibration._model import (
    mape,
    predict_all_reduce,
    predict_elementwise,
    predict_gemm,
)
from slotune.tuner.sim.calibration._report import BEGIN, END
from slotune.tuner.sim.catalog import get_gpu
from slotune.tuner.sim.cost_coeffs import (
    ELEMENTWISE_OPS,
    AllReduceCoeffs,
    ElementwiseCoeffs,
    GemmCoeffs,
    load_calibration,
)
from slotune.tuner.sim.cost_ops import (
    GEMM_OPS,
    LayerDims,
    all_reduce_time_s,
    elementwise_time_s,
    gemm_time_s,
)

GPU = get_gpu("h100-sxm")
TRUE_GEMM = GemmCoeffs(compute_eff=0.7, memory_eff=0.85, smoothing_p=2.0, latency_s=5e-6)
TRUE_ELEMENTWISE = ElementwiseCoeffs(memory_eff=0.5, row_eff=0.005, latency_s=2e-6)
TRUE_ALL_REDUCE = AllReduceCoeffs({2: 15e-6, 4: 25e-6}, {2: 0.6, 4: 0.7})
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def write_compute_csv(path: Path) -> None:
    path.parent.mkdir(parents=True)
    header = [f"time_stats.{op}.median" for op in GEMM_OPS + ELEMENTWISE_OPS] + [
        "n_head",
        "n_kv_head",
        "n_embd",
        "n_expanded_embd",
        "vocab_size",
        "use_gated_mlp",
        "num_tokens",
        "num_tensor_parallel_workers",
    ]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for tp in (1, 2):
            dims = LayerDims(4096, 32, 8, 128, 14336, tp)
            for tokens in TOKENS:
                row = []
                for op in GEMM_OPS:
                    k, n = dims.gemm_shapes()[op]
                    row.append(
                        gemm_time_s(
                            float(tokens), k, n, GPU.bf16_flops, GPU.mem_bw_bytes_s, TRUE_GEMM
                        )
                        * 1e3
                    )
                for op in ELEMENTWISE_OPS:
                    row.append(
                        float(
                            elementwise_time_s(
                                float(tokens),
                                dims.elementwise_bytes_per_token()[op],
                                GPU.mem_bw_bytes_s,
                                TRUE_ELEMENTWISE,
                            )
                        )
                        * 1e3
                    )
                writer.writerow([*row, 32, 8, 4096, 14336, 128256, True, tokens, tp])


def write_network_csv(path: Path) -> None:
    path.parent.mkdir(parents=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["time_stats.all_reduce.median", "num_workers", "size", "devices_per_node"])
        for n in (2, 4):
            for size in (2048, 65536, 1 << 20, 1 << 24, 1 << 26):
                t = all_reduce_time_s(float(size), n, GPU.interconnect_bw_bytes_s, TRUE_ALL_REDUCE)
                writer.writerow([t * 1e3, n, size, n])


def test_fit_recovers_known_coefficients(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    profiling = tmp_path / "profiling"
    write_compute_csv(profiling / "compute" / "h100" / "org" / "Model-8B" / "mlp.csv")
    write_network_csv(profiling / "network" / "h100_dgx" / "all_reduce.csv")
    output = tmp_path / "calibration.yaml"
    report = tmp_path / "report.md"
    report.write_text(f"# Report\n\n{BEGIN}\nold\n{END}\n\ntail\n")
    assert (
        fit.main(
            [
                "--profiling",
                str(profiling),
                "--output",
                str(output),
                "--report",
                str(report),
                "--reference",
                "h100=h100-sxm",
            ]
        )
        == 0
    )

    family = load_calibration(calibration_path=output).families["h100"]
    assert family.gemm.compute_eff == pytest.approx(TRUE_GEMM.compute_eff, rel=0.05)
    assert family.gemm.memory_eff == pytest.approx(TRUE_GEMM.memory_eff, rel=0.05)
    for op in ELEMENTWISE_OPS:
        assert family.elementwise[op].memory_eff == pytest.approx(0.5, rel=0.05), op
    assert family.all_reduce.latency_s[4] == pytest.approx(25e-6, rel=0.05)
    assert family.all_reduce.bus_bw_eff[2] == pytest.approx(0.6, rel=0.05)

    text = report.read_text()
    assert "old" not in text and text.endswith("tail\n")
    assert "| h100 | Model-8B | linear |" in text
    assert "Overall operator MAPE: **0." in text
    assert "Overall operator MAPE" in capsys.readouterr().out


def test_fit_reports_a_wrong_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert (
        fit.main(
            ["--profiling", str(tmp_path), "--no-report", "--output", str(tmp_path / "c.yaml")]
        )
        == 1
    )
    assert "no compute/<gpu>/<org>/<model>/mlp.csv" in capsys.readouterr().err


SAMPLE = Path(__file__).parent / "data" / "vidur_profiling_sample"
REFERENCE_GPUS = {"a100": get_gpu("a100-80gb"), "h100": get_gpu("h100-sxm")}


def test_bundled_calibration_matches_real_operator_timings():
    calibration = load_calibration()
    compute = load_compute(SAMPLE)
    assert {s.model for s in compute} == {
        "Meta-Llama-3-8B",
        "Meta-Llama-3-70B",
        "Llama-2-7b-hf",
        "Llama-2-70b-hf",
    }
    layers: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
    for s in compute:
        gpu = REFERENCE_GPUS[s.family]
        family = calibration.families[s.family]
        if s.op in GEMM_OPS:
            predicted = predict_gemm(s, gpu, family.gemm)
        else:
            predicted = predict_elementwise(s, gpu, family.elementwise[s.op])
        assert mape(predicted, s.measured_s) < 25.0, (s.family, s.model, s.op)
        layers.setdefault((s.family, s.model), []).append((predicted, s.measured_s))
    for key, parts in layers.items():
        predicted = np.sum([p for p, _ in parts], axis=0)
        measured = np.sum([m for _, m in parts], axis=0)
        assert mape(predicted, measured) < 12.0, key


def test_bundled_calibration_matches_real_all_reduce_timings():
    calibration = load_calibration()
    for s in load_all_reduce(SAMPLE):
        predicted = predict_all_reduce(
            s, REFERENCE_GPUS[s.family], calibration.families[s.family].all_reduce
        )
        # Small messages are noisy (2 KiB: 10 us once, 61 us at the next worker count), and
        # this 17-size sample weighs them more than the full data does.
        assert mape(predicted, s.measured_s) < 25.0, (s.family, s.num_workers)
