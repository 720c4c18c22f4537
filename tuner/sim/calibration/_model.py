"""The cost model's operator formulas evaluated on profiling samples, and their fits."""

from __future__ import annotations

import numpy as np

from slotune.tuner.sim.calibration._data import AllReduceSamples, OpSamples
from slotune.tuner.sim.calibration._optimize import minimize
from slotune.tuner.sim.catalog import GPU
from slotune.tuner.sim.cost_coeffs import AllReduceCoeffs, ElementwiseCoeffs, GemmCoeffs
from slotune.tuner.sim.cost_ops import all_reduce_time_s, elementwise_time_s, gemm_time_s


def _r(value: float, digits: int) -> float:
    """A plain rounded float (numpy scalars do not serialise to YAML)."""
    return round(float(value), digits)


def mape(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Mean absolute percentage error, in percent."""
    return float(np.mean(np.abs(predicted - measured) / measured) * 100.0)


def token_weights(num_tokens: np.ndarray) -> np.ndarray:
    """Weights that give every power-of-two token range the same total weight.

    The profiling grid is dense at large token counts, but a serving engine spends most steps
    at small ones (decode batches), so an unweighted fit would neglect them.
    """
    bins = np.floor(np.log2(np.maximum(num_tokens, 1.0))).astype(int)
    counts = np.bincount(bins)
    return np.asarray(1.0 / counts[bins], dtype=float)


def _weighted_error(samples: list[OpSamples], predictions: list[np.ndarray]) -> float:
    errors = np.concatenate(
        [np.abs(p - s.measured_s) / s.measured_s for s, p in zip(samples, predictions, strict=True)]
    )
    weights = np.concatenate([token_weights(s.num_tokens) for s in samples])
    return float(np.sum(errors * weights) / np.sum(weights))


def predict_gemm(s: OpSamples, gpu: GPU, c: GemmCoeffs) -> np.ndarray:
    shapes = np.array([d.gemm_shapes()[s.op] for d in s.dims], dtype=float)
    return np.asarray(
        gemm_time_s(s.num_tokens, shapes[:, 0], shapes[:, 1], gpu.bf16_flops, gpu.mem_bw_bytes_s, c)
    )


def predict_elementwise(s: OpSamples, gpu: GPU, c: ElementwiseCoeffs) -> np.ndarray:
    per_token = np.array([d.elementwise_bytes_per_token()[s.op] for d in s.dims])
    return np.asarray(elementwise_time_s(s.num_tokens, per_token, gpu.mem_bw_bytes_s, c))


def predict_all_reduce(s: AllReduceSamples, gpu: GPU, c: AllReduceCoeffs) -> np.ndarray:
    return np.asarray(
        all_reduce_time_s(s.size_bytes, s.num_workers, gpu.interconnect_bw_bytes_s, c)
    )


def fit_gemm(samples: list[OpSamples], gpu: GPU) -> GemmCoeffs:
    """One roofline for every linear layer of a GPU family, minimising token-weighted MAPE."""

    def objective(x: np.ndarray) -> float:
        c = GemmCoeffs(x[0], x[1], x[2], x[3] * 1e-6)
        return _weighted_error(samples, [predict_gemm(s, gpu, c) for s in samples])

    x, _ = minimize(
        objective,
        [0.7, 0.8, 2.0, 5.0],
        [0.05, 0.05, 1.0, 0.0],
        [1.0, 1.0, 12.0, 50.0],
        steps=[0.1, 0.1, 1.0, 2.0],
    )
    return GemmCoeffs(_r(x[0], 4), _r(x[1], 4), _r(x[2], 3), _r(x[3] * 1e-6, 9))


def fit_elementwise(samples: list[OpSamples], gpu: GPU) -> ElementwiseCoeffs:
    """Bandwidth efficiency and latency of one memory-bound operator (token-weighted MAPE)."""

    def objective(x: np.ndarray) -> float:
        c = ElementwiseCoeffs(x[0], x[1] * 1e-3, x[2] * 1e-6)
        return _weighted_error(samples, [predict_elementwise(s, gpu, c) for s in samples])

    x, _ = minimize(
        objective, [0.5, 5.0, 2.0], [0.01, 0.01, 0.0], [1.0, 1000.0, 100.0], steps=[0.1, 2.0, 1.0]
    )
    return ElementwiseCoeffs(_r(x[0], 4), _r(x[1] * 1e-3, 7), _r(x[2] * 1e-6, 9))


def fit_all_reduce(samples: list[AllReduceSamples], gpu: GPU) -> AllReduceCoeffs:
    """Latency and bus-bandwidth efficiency per worker count, minimising MAPE."""
    latency: dict[int, float] = {}
    eff: dict[int, float] = {}
    for s in samples:

        def objective(x: np.ndarray, s: AllReduceSamples = s) -> float:
            c = AllReduceCoeffs({s.num_workers: x[0] * 1e-6}, {s.num_workers: x[1]})
            return mape(predict_all_reduce(s, gpu, c), s.measured_s)

        x, _ = minimize(objective, [20.0, 0.5], [0.0, 0.01], [500.0, 1.0], steps=[5.0, 0.1])
        latency[s.num_workers] = _r(x[0] * 1e-6, 9)
        eff[s.num_workers] = _r(x[1], 4)
    return AllReduceCoeffs(latency, eff)
