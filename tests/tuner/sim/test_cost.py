from __future__ import annotations

import dataclasses
import itertools

import pytest

from slotune.collector.errors import ConfigError, EngineConfigError
from slotune.tuner.sim.catalog import get_gpu, get_model, list_gpus
from slotune.tuner.sim.cost import CostModel, StepShape
from slotune.tuner.sim.cost_coeffs import load_calibration
from slotune.tuner.sim.cost_ops import expected_experts_touched

H100 = get_gpu("h100-sxm")
LLAMA_8B = get_model("llama-3.1-8b")


def decode(num_seqs: int, context_per_seq: int = 1000) -> StepShape:
    return StepShape(num_decode_seqs=num_seqs, decode_context_tokens=num_seqs * context_per_seq)


def prefill(tokens: int, context_before: int = 0) -> StepShape:
    return StepShape(
        num_prefill_tokens=tokens,
        prefill_attention_work=tokens * (context_before + tokens / 2),
        num_prefill_seqs=1,
    )


def test_fast_path_equals_split_total():
    cost = CostModel(LLAMA_8B, H100)
    for shape in (
        decode(1),
        decode(64, 3000),
        prefill(2048, 512),
        StepShape(300, 300 * 1500.0, 40, 40 * 900, 2),
    ):
        split = cost.step_time(shape)
        assert cost.step_time_s(*dataclasses.astuple(shape)) == pytest.approx(split.total_s)
        assert split.total_s == pytest.approx(
            split.compute_s + split.memory_s + split.overhead_s + split.communication_s
        )


def test_empty_step_takes_no_time():
    cost = CostModel(LLAMA_8B, H100)
    assert cost.step_time_s(0, 0.0, 0, 0, 0) == 0.0
    assert cost.step_time(StepShape()).total_s == 0.0


def test_monotonic_in_tokens_and_context():
    cost = CostModel(LLAMA_8B, H100)
    decode_times = [cost.step_time_s(0, 0.0, n, n * 1000, 0) for n in range(1, 513)]
    assert all(b >= a for a, b in itertools.pairwise(decode_times))
    prefill_times = [cost.step_time_s(t, t * t / 2, 0, 0, 1) for t in range(1, 8193, 7)]
    assert all(b >= a for a, b in itertools.pairwise(prefill_times))
    context_times = [cost.step_time_s(0, 0.0, 32, c, 0) for c in range(0, 500_000, 5000)]
    assert all(b > a for a, b in itertools.pairwise(context_times))
    work_times = [cost.step_time_s(512, w, 0, 0, 1) for w in range(0, 10**8, 10**6)]
    assert all(b > a for a, b in itertools.pairwise(work_times))


def test_decode_is_memory_bound_and_long_prefill_compute_bound():
    cost = CostModel(LLAMA_8B, H100)
    small = cost.step_time(decode(8))
    assert small.memory_s > 5 * small.compute_s
    # One decode step streams all ~16 GB of weights: at 3.35 TB/s that is ~5 ms at least.
    assert 4.8e-3 < small.total_s < 12e-3
    big = cost.step_time(prefill(8192))
    assert big.compute_s > 5 * big.memory_s
    # 2 * 8.03e9 params * 8192 tokens at 989 TFLOP/s peak: >= 133 ms, < 2x that.
    assert 0.133 < big.total_s < 0.27


def test_tensor_parallelism_reduces_linear_time_and_adds_communication():
    model = get_model("llama-3.1-70b")
    times = {
        tp: CostModel(model, H100, tensor_parallel_size=tp).step_time(prefill(4096))
        for tp in (1, 2, 4, 8)
    }
    assert times[1].communication_s == 0.0
    for a, b in ((1, 2), (2, 4), (4, 8)):
        assert times[b].compute_s < 0.6 * times[a].compute_s
        assert times[b].communication_s > 0.0
        assert times[b].total_s < times[a].total_s
    decode_1 = CostModel(model, H100).step_time(decode(16))
    decode_4 = CostModel(model, H100, tensor_parallel_size=4).step_time(decode(16))
    assert decode_4.memory_s < 0.3 * decode_1.memory_s


def test_fp8_kv_cache_halves_the_decode_kv_bytes_term():
    def kv_term(kv_cache_dtype: str) -> float:
        cost = CostModel(LLAMA_8B, H100, kv_cache_dtype=kv_cache_dtype)
        low = cost.step_time(StepShape(num_decode_seqs=32, decode_context_tokens=32_000))
        high = cost.step_time(StepShape(num_decode_seqs=32, decode_context_tokens=132_000))
        return high.memory_s - low.memory_s

    assert kv_term("fp8") == pytest.approx(kv_term("auto") / 2)
    assert kv_term("fp8_e5m2") == pytest.approx(kv_term("fp8"))


def test_expected_experts_touched_never_exceeds_all_experts():
    for experts, active in ((8, 2), (128, 8)):
        assert expected_experts_touched(1.0, experts, active) == pytest.approx(active)
        counts = [expected_experts_touched(float(t), experts, active) for t in range(1, 5000)]
        assert all(b >= a for a, b in itertools.pairwise(counts))
        assert max(counts) <= experts
        assert counts[-1] == pytest.approx(experts)


def test_moe_decode_reads_only_touched_experts():
    moe = CostModel(get_model("qwen3-30b-a3b"), H100)
    dense = CostModel(get_model("qwen3-32b"), H100)
    # One sequence touches 8 of 128 experts: far less than a dense model of similar size.
    assert moe.step_time_s(0, 0.0, 1, 1000, 0) < 0.5 * dense.step_time_s(0, 0.0, 1, 1000, 0)
    # A large batch touches every expert, so cost stops growing with expert coverage.
    mixtral = CostModel(get_model("mixtral-8x7b"), H100)
    one = mixtral.step_time(decode(1)).memory_s
    many = mixtral.step_time(decode(64)).memory_s
    assert 2.0 < many / one < 4.5


def test_enforce_eager_adds_launch_overhead_to_small_batches():
    graphs = CostModel(LLAMA_8B, H100).step_time(decode(4))
    eager = CostModel(LLAMA_8B, H100, enforce_eager=True).step_time(decode(4))
    assert eager.overhead_s > graphs.overhead_s
    assert eager.total_s > graphs.total_s
    # A long prefill is not captured in graphs either way: no difference.
    long_graphs = CostModel(LLAMA_8B, H100).step_time_s(8192, 8192**2 / 2, 0, 0, 1)
    long_eager = CostModel(LLAMA_8B, H100, enforce_eager=True).step_time_s(
        8192, 8192**2 / 2, 0, 0, 1
    )
    assert long_eager == pytest.approx(long_graphs)


def test_faster_gpu_is_faster():
    shape = StepShape(256, 256 * 800.0, 64, 64 * 2000, 1)
    times = {
        g: CostModel(LLAMA_8B, get_gpu(g)).step_time(shape).total_s
        for g in ("l4", "a100-80gb", "h100-sxm", "b200")
    }
    assert times["l4"] > times["a100-80gb"] > times["h100-sxm"] > times["b200"]


def test_every_catalog_gpu_has_a_calibration():
    calibration = load_calibration()
    for gpu in list_gpus():
        # User-added GPUs may leave calibration_family empty: they get the default family.
        assert gpu.calibration_family in {*calibration.families, ""}, gpu.id
        CostModel(LLAMA_8B, gpu).step_time_s(100, 5000.0, 10, 10000, 1)


def test_bad_configurations_fail_like_the_engine():
    with pytest.raises(
        EngineConfigError,
        match=r"attention heads \(32\) must be divisible by "
        r"tensor parallel size \(3\)",
    ):
        CostModel(LLAMA_8B, H100, tensor_parallel_size=3)
    with pytest.raises(ConfigError, match="unknown kv_cache_dtype 'int3'"):
        CostModel(LLAMA_8B, H100, kv_cache_dtype="int3")


def test_custom_knobs_file(tmp_path):
    from importlib import resources

    text = resources.files("slotune.tuner.sim.catalog").joinpath("knobs.yaml").read_text()
    path = tmp_path / "knobs.yaml"
    path.write_text(text.replace("step_s: 1.6e-3", "step_s: 5.0e-3"))
    custom = CostModel(LLAMA_8B, H100, calibration=load_calibration(knobs_path=path))
    default = CostModel(LLAMA_8B, H100)
    difference = custom.step_time_s(0, 0.0, 8, 8000, 0) - default.step_time_s(0, 0.0, 8, 8000, 0)
    assert difference == pytest.approx(3.4e-3)
    path.write_text(text.replace("  step_s: 1.6e-3\n", ""))
    with pytest.raises(ConfigError, match="`step_s` must be a non-negative number"):
        load_calibration(knobs_path=path)
