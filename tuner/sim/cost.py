"""Time of one engine step (one forward pass over a batch) on one GPU model.

A step is described by its aggregate shape (:class:`StepShape`); its time is

* linear layers (QKV, output, gate/up, down; routed experts for MoE) by a fitted roofline;
  with fp8 weights (``quantization``) at the GPU's fp8 tensor-core rate and one byte per
  weight (the LM head stays 16-bit, as vLLM, SGLang and TensorRT-LLM keep it),
* memory-bound kernels (norms, RoPE, activation, residual add, embedding) at a fitted bandwidth,
* attention: prefill FLOPs over the causal context, decode K/V bytes read (halved with an fp8
  KV cache),
* tensor-parallel all-reduce, two per layer plus the embedding's (the engines' own kernel for
  small messages over NVLink, NCCL's fitted timings otherwise),
* the LM head and sampler over the sequences that produce a token,
* host overhead per step and per sequence, and kernel launches: one CUDA graph replay, in
  which kernels keep only part of their fitted (launch-inclusive) latency; or without graphs
  (``enforce_eager``, or batches larger than the captured sizes) the full latencies plus one
  host launch per layer that the GPU hides only behind its own work.

Coefficients come from ``calibration.yaml`` (fitted) and ``knobs.yaml`` (hand-set), see
:mod:`tuner.sim.cost_coeffs`. :meth:`CostModel.step_time_s` is the hot path of the simulator:
everything that depends only on the batch's token count is cached per count, the rest is a
handful of float operations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from slotune.collector.errors import ConfigError
from slotune.tuner.sim.catalog import GPU, QUANTIZATIONS, ModelSpec, StepTerms
from slotune.tuner.sim.cost_coeffs import (
    AllReduceCoeffs,
    Calibration,
    ElementwiseCoeffs,
    FamilyCoeffs,
    GemmCoeffs,
    OverheadKnobs,
    load_calibration,
)
from slotune.tuner.sim.cost_ops import (
    LayerDims,
    Num,
    all_reduce_time_s,
    elementwise_time_s,
    expected_experts_touched,
    gemm_flops_bytes,
    roofline_time_s,
)
from slotune.tuner.sim.memory import kv_bytes_per_token, validate_tensor_parallel

# The sampler reads and writes fp32 logits a few times (softmax, top-k/p, log-probs).
_SAMPLER_PASSES = 3
_FP32_BYTES = 4
# Fitted step terms may be negative; they never take a step below this share of the
# roofline's own time, so a correction fitted on one batch mix cannot make another free.
_MIN_SHARE_WITH_TERMS = 0.1


@dataclass(frozen=True, slots=True)
class StepShape:
    """What one scheduler step runs, aggregated over its sequences.

    Attributes:
        num_prefill_tokens: new prompt tokens computed this step (all chunks together).
        prefill_attention_work: sum over prefill chunks of
            ``n_new * (n_ctx_before + n_new / 2)``, i.e. causal query-key pairs.
        num_decode_seqs: sequences generating one token this step.
        decode_context_tokens: K/V tokens the decode sequences read (their context lengths).
        num_prefill_seqs: sequences with a prefill chunk this step.
    """

    num_prefill_tokens: int = 0
    prefill_attention_work: float = 0.0
    num_decode_seqs: int = 0
    decode_context_tokens: int = 0
    num_prefill_seqs: int = 0


@dataclass(frozen=True, slots=True)
class StepTime:
    """A step's time and its split.

    ``compute_s`` are kernels bound by FLOPs, ``memory_s`` kernels bound by memory bandwidth,
    ``communication_s`` tensor-parallel collectives, ``overhead_s`` host time and kernel
    launches the GPU did not hide. ``total_s`` is their sum.
    """

    total_s: float
    compute_s: float
    memory_s: float
    overhead_s: float
    communication_s: float = 0.0


@dataclass(frozen=True, slots=True)
class _Split:
    compute_s: float
    memory_s: float
    communication_s: float

    @property
    def total_s(self) -> float:
        return self.compute_s + self.memory_s + self.communication_s


class CostModel:
    """Step times of one model served on ``tensor_parallel_size`` GPUs of one kind.

    Args:
        model: the model architecture.
        gpu: the accelerator (all ranks alike).
        tensor_parallel_size: GPUs the model is sharded over.
        kv_cache_dtype: ``"auto"`` (the model's dtype) or ``"fp8"`` (also ``fp8_e4m3``,
            ``fp8_e5m2``).
        quantization: the weights' quantization (``"fp8"``); None: the model's dtype.
        enforce_eager: run without CUDA graphs (one kernel launch at a time).
        calibration: coefficients; the bundled fitted ones by default.
        host_step_s: the engine's fixed host time per step from the overhead knobs (its
            adapter's ``host_step_s``); by default the knobs' ``step_s`` (vLLM's).
        overlaps_host: the host time of a step runs while the GPU runs the previous one
            (vLLM's async scheduling, SGLang's overlap scheduler), so it shows only where
            it is longer than the GPU's.

    Raises:
        EngineConfigError: the tensor-parallel size does not divide the model's heads.
        ConfigError: an unknown ``kv_cache_dtype`` or ``quantization``.
    """

    def __init__(
        self,
        model: ModelSpec,
        gpu: GPU,
        *,
        tensor_parallel_size: int = 1,
        kv_cache_dtype: str = "auto",
        quantization: str | None = None,
        enforce_eager: bool = False,
        calibration: Calibration | None = None,
        host_step_s: Callable[[OverheadKnobs], float] | None = None,
        overlaps_host: bool = False,
    ) -> None:
        validate_tensor_parallel(model, tensor_parallel_size)
        if quantization is not None and quantization not in QUANTIZATIONS:
            raise ConfigError(
                f"quantization {quantization!r} is not simulated; use one of "
                f"{', '.join(QUANTIZATIONS)} or none"
            )
        self.model = model
        self.nominal_gpu = gpu
        # Factors fitted to the user's measurements scale the datasheet rates once here.
        eff = gpu.efficiency
        self.gpu = replace(
            gpu,
            bf16_flops=gpu.bf16_flops * eff.compute,
            fp8_flops=gpu.fp8_flops * eff.compute,
            mem_bw_bytes_s=gpu.mem_bw_bytes_s * eff.memory,
            interconnect_bw_bytes_s=gpu.interconnect_bw_bytes_s * eff.interconnect,
        )
        self.tensor_parallel_size = tensor_parallel_size
        self.kv_cache_dtype = kv_cache_dtype
        self.quantization = quantization
        self.enforce_eager = enforce_eager
        self.overlaps_host = overlaps_host
        # Linear layers' weight width and tensor-core rate (the LM head stays 16-bit).
        self._weight_bytes = 1 if quantization == "fp8" else model.dtype_bytes
        self._gemm_peak = self.gpu.fp8_flops if quantization == "fp8" else self.gpu.bf16_flops
        self._host_step_s = host_step_s
        self.calibration = calibration or load_calibration()
        # fp8 GEMMs quantize their input first: one more small kernel per linear layer.
        self._quant_s_per_layer = (
            4 * self.calibration.quantization.fp8_activation_quant_latency_s
            if quantization == "fp8"
            else 0.0
        )
        self._eager_family = self.calibration.family_for(gpu)
        self._graph_family = _graph_replay(
            self._eager_family, self.calibration.overhead.cuda_graph_latency_scale
        )
        self._dims = LayerDims(
            model.hidden_size,
            model.num_heads,
            model.num_kv_heads,
            model.head_dim,
            model.intermediate_size,
            tensor_parallel_size,
            model.dtype_bytes,
        )
        self._linear_cache: dict[int, float] = {}
        self._head_cache: tuple[dict[int, float], dict[int, float]] = ({}, {})
        # step_time's splits at CUDA-graph speed, per token count and per sequence count.
        self._graph_splits: tuple[dict[int, _Split], dict[int, _Split]] = ({}, {})
        self._precompute_constants()

    def _precompute_constants(self) -> None:
        att = self.calibration.attention
        ovh = self.calibration.overhead
        car = self.calibration.custom_all_reduce
        layers = self.model.num_layers
        dims = self._dims
        flops_per_pair = 4.0 * dims.heads_per_rank * dims.head_dim
        kv_bytes_layer = (
            kv_bytes_per_token(self.model, self.tensor_parallel_size, self.kv_cache_dtype) / layers
        )
        peak = self.gpu.bf16_flops
        bw = self.gpu.mem_bw_bytes_s
        self._prefill_s_per_work = layers * flops_per_pair / (att.prefill_compute_eff * peak)
        self._decode_compute_s_per_token = (
            layers * flops_per_pair / (att.prefill_compute_eff * peak)
        )
        self._decode_memory_s_per_token = layers * kv_bytes_layer / (att.decode_memory_eff * bw)
        self._attention_fixed_s = layers * att.latency_s
        self._eager_launch_s = layers * ovh.eager_launch_per_layer_s
        self._graph_launch_s = ovh.cuda_graph_launch_s
        # Batches above the largest captured size run without a graph, as with enforce_eager.
        self._graph_max_tokens = -1 if self.enforce_eager else ovh.cuda_graph_max_tokens
        eff = self.nominal_gpu.efficiency
        engine_step_s = ovh.step_s if self._host_step_s is None else self._host_step_s(ovh)
        self._step_s = engine_step_s if eff.step_overhead_s is None else eff.step_overhead_s
        self._per_seq_s = ovh.per_seq_s
        self._all_reduce_extra_s = (
            eff.all_reduce_latency_s if self.tensor_parallel_size > 1 else 0.0
        )
        # The engines' own all-reduce kernel needs an NVLink-class link (the datasheet's);
        # below that, NCCL runs over PCIe (knobs.yaml pcie_all_reduce).
        self._is_pcie_only = self.nominal_gpu.interconnect_bw_bytes_s < car.min_interconnect_bytes_s
        self._custom_all_reduce_max_bytes = -1 if self._is_pcie_only else car.max_bytes
        self._terms = eff.step_terms
        self._has_terms = eff.step_terms != StepTerms()

    def _with_terms(
        self,
        total_s: float,
        num_prefill_tokens: int,
        prefill_attention_work: float,
        num_decode_seqs: int,
        decode_context_tokens: int,
    ) -> float:
        """``total_s`` plus the fitted step terms (``Efficiency.step_terms``)."""
        t = self._terms
        corrected = (
            total_s
            + t.step_s
            + t.prefill_token_s * num_prefill_tokens
            + t.attention_pair_s * prefill_attention_work
            + t.decode_seq_s * num_decode_seqs
            + t.kv_token_s * decode_context_tokens
        )
        return max(corrected, _MIN_SHARE_WITH_TERMS * total_s)

    # ---- kernels ----------------------------------------------------------------------
    def _roofline(
        self,
        flops: Num,
        moved: Num,
        c: GemmCoeffs,
        split: list[float],
        peak: float | None = None,
    ) -> None:
        peak = self.gpu.bf16_flops if peak is None else peak
        bw = self.gpu.mem_bw_bytes_s
        t = float(roofline_time_s(flops, moved, peak, bw, c))
        is_compute_bound = float(flops) / (c.compute_eff * peak) >= float(moved) / (
            c.memory_eff * bw
        )
        split[0 if is_compute_bound else 1] += t

    def _elementwise(self, tokens: float, bytes_per_token: float, c: ElementwiseCoeffs) -> float:
        return float(elementwise_time_s(tokens, bytes_per_token, self.gpu.mem_bw_bytes_s, c))

    def _all_reduce(self, num_bytes: float, fam: FamilyCoeffs) -> float:
        c = fam.all_reduce
        if self._is_pcie_only:
            pcie = self.calibration.pcie_all_reduce
            c = AllReduceCoeffs(
                dict.fromkeys(c.latency_s, pcie.latency_s),
                dict.fromkeys(c.bus_bw_eff, pcie.bus_bw_eff),
            )
        elif num_bytes <= self._custom_all_reduce_max_bytes:
            latency = self.calibration.custom_all_reduce.latency_for(self.tensor_parallel_size)
            c = AllReduceCoeffs({n: latency for n in c.latency_s}, c.bus_bw_eff)
        return self._all_reduce_extra_s + float(
            all_reduce_time_s(
                num_bytes, self.tensor_parallel_size, self.gpu.interconnect_bw_bytes_s, c
            )
        )

    def _mlp(self, tokens: int, fam: FamilyCoeffs, split: list[float]) -> None:
        model, dims = self.model, self._dims
        b, wb, peak = model.dtype_bytes, self._weight_bytes, self._gemm_peak
        act = fam.elementwise["mlp_act"]
        if not model.is_moe:
            for op in ("mlp_up_proj", "mlp_down_proj"):
                k, n = dims.gemm_shapes()[op]
                self._roofline(*gemm_flops_bytes(float(tokens), k, n, b, wb), fam.gemm, split, peak)
            split[1] += self._elementwise(
                tokens, dims.elementwise_bytes_per_token()["mlp_act"], act
            )
            return
        h, width = model.hidden_size, model.moe_intermediate_size // self.tensor_parallel_size
        routed = tokens * model.num_active_experts
        touched = expected_experts_touched(
            float(tokens), model.num_experts, model.num_active_experts
        )
        self._roofline(*gemm_flops_bytes(float(tokens), h, model.num_experts, b), fam.gemm, split)
        flops = 2.0 * routed * h * 3 * width
        moved = wb * touched * 3 * h * width + b * routed * (2 * h + 3 * width)
        self._roofline(flops, moved, fam.gemm, split, peak)
        split[1] += self._elementwise(routed, 3 * width * b, act)

    # ---- per-token-count parts (cached in the fast path) --------------------------------
    def _linear_split(self, tokens: int, fam: FamilyCoeffs) -> _Split:
        """Everything in a forward pass over ``tokens`` tokens except attention and LM head."""
        dims = self._dims
        layer = [0.0, 0.0, 0.0]
        for op in ("attn_pre_proj", "attn_post_proj"):
            k, n = dims.gemm_shapes()[op]
            self._roofline(
                *gemm_flops_bytes(float(tokens), k, n, self.model.dtype_bytes, self._weight_bytes),
                fam.gemm,
                layer,
                self._gemm_peak,
            )
        self._mlp(tokens, fam, layer)
        per_token = dims.elementwise_bytes_per_token()
        for op in ("input_layernorm", "attn_rope", "post_attention_layernorm", "add"):
            layer[1] += self._elementwise(tokens, per_token[op], fam.elementwise[op])
        layer[1] += self._quant_s_per_layer
        all_reduce = self._all_reduce(tokens * self.model.hidden_size * self.model.dtype_bytes, fam)
        layer[2] += 2 * all_reduce
        layers = self.model.num_layers
        embedding = self._elementwise(tokens, per_token["emb"], fam.elementwise["emb"])
        final_norm = self._elementwise(
            tokens, per_token["input_layernorm"], fam.elementwise["input_layernorm"]
        )
        return _Split(
            layers * layer[0],
            layers * layer[1] + embedding + final_norm,
            layers * layer[2] + all_reduce,
        )

    def _head_split(self, num_seqs: int, fam: FamilyCoeffs) -> _Split:
        """LM head, logits gather and sampler for ``num_seqs`` sampled sequences."""
        if num_seqs <= 0:
            return _Split(0.0, 0.0, 0.0)
        model = self.model
        vocab_per_rank = model.vocab_size // self.tensor_parallel_size
        split = [0.0, 0.0, 0.0]
        self._roofline(
            *gemm_flops_bytes(
                float(num_seqs), model.hidden_size, vocab_per_rank, model.dtype_bytes
            ),
            fam.gemm,
            split,
        )
        split[2] += self._all_reduce(float(num_seqs * vocab_per_rank * model.dtype_bytes), fam)
        split[1] += self._elementwise(
            num_seqs, _SAMPLER_PASSES * model.vocab_size * _FP32_BYTES, fam.elementwise["mlp_act"]
        )
        return _Split(*split)

    def _family(self, tokens: int) -> FamilyCoeffs:
        return self._graph_family if tokens <= self._graph_max_tokens else self._eager_family

    def _linear_s(self, tokens: int) -> float:
        value = self._linear_split(tokens, self._family(tokens)).total_s
        self._linear_cache[tokens] = value
        return value

    def _head_s(self, num_seqs: int, in_graph: bool) -> float:
        fam = self._graph_family if in_graph else self._eager_family
        value = self._head_split(num_seqs, fam).total_s
        self._head_cache[in_graph][num_seqs] = value
        return value

    # ---- public ------------------------------------------------------------------------
    def step_time_s(
        self,
        num_prefill_tokens: int,
        prefill_attention_work: float,
        num_decode_seqs: int,
        decode_context_tokens: int,
        num_prefill_seqs: int = 0,
    ) -> float:
        """Total time of one step, in seconds (fast path of :meth:`step_time`).

        Args:
            num_prefill_tokens: new prompt tokens this step.
            prefill_attention_work: causal query-key pairs of the prefill chunks.
            num_decode_seqs: decoding sequences (one token each).
            decode_context_tokens: K/V tokens read by the decoding sequences.
            num_prefill_seqs: sequences with a prefill chunk.

        Returns:
            Seconds; 0.0 for an empty step.
        """
        tokens = num_prefill_tokens + num_decode_seqs
        if tokens <= 0:
            return 0.0
        num_seqs = num_decode_seqs + num_prefill_seqs
        in_graph = tokens <= self._graph_max_tokens
        linear = self._linear_cache.get(tokens)
        if linear is None:
            linear = self._linear_s(tokens)
        head = self._head_cache[in_graph].get(num_seqs)
        if head is None:
            head = self._head_s(num_seqs, in_graph)
        gpu_s = (
            linear
            + head
            + self._attention_fixed_s
            + self._prefill_s_per_work * prefill_attention_work
            + (self._decode_memory_s_per_token + self._decode_compute_s_per_token)
            * decode_context_tokens
        )
        launch_s = self._graph_launch_s if in_graph else self._eager_launch_s
        if launch_s > gpu_s:
            gpu_s = launch_s
        host_s = self._step_s + self._per_seq_s * num_seqs
        # async scheduling: the host prepares this step while the GPU runs the last one
        total = max(gpu_s, host_s) if self.overlaps_host else gpu_s + host_s
        if self._has_terms:
            return self._with_terms(
                total,
                num_prefill_tokens,
                prefill_attention_work,
                num_decode_seqs,
                decode_context_tokens,
            )
        return total

    def step_time(self, shape: StepShape) -> StepTime:
        """Time of one step with its compute / memory / communication / overhead split.

        Kernels are split at their CUDA-graph speed; what running without a graph adds
        (longer kernel latencies, launches the GPU cannot hide) counts as overhead. Agrees
        with :meth:`step_time_s` on the total.
        """
        tokens = shape.num_prefill_tokens + shape.num_decode_seqs
        if tokens <= 0:
            return StepTime(0.0, 0.0, 0.0, 0.0, 0.0)
        num_seqs = shape.num_decode_seqs + shape.num_prefill_seqs
        in_graph = tokens <= self._graph_max_tokens
        linear_cache, head_cache = self._graph_splits
        linear = linear_cache.get(tokens)
        if linear is None:
            linear = linear_cache[tokens] = self._linear_split(tokens, self._graph_family)
        head = head_cache.get(num_seqs)
        if head is None:
            head = head_cache[num_seqs] = self._head_split(num_seqs, self._graph_family)
        compute = (
            linear.compute_s
            + head.compute_s
            + self._prefill_s_per_work * shape.prefill_attention_work
            + self._decode_compute_s_per_token * shape.decode_context_tokens
        )
        memory = (
            linear.memory_s
            + head.memory_s
            + self._attention_fixed_s
            + self._decode_memory_s_per_token * shape.decode_context_tokens
        )
        communication = linear.communication_s + head.communication_s
        gpu_s = compute + memory + communication
        if in_graph:
            launch_s, eager_extra = self._graph_launch_s, 0.0
        else:
            eager = (
                self._linear_split(tokens, self._eager_family).total_s
                + self._head_split(num_seqs, self._eager_family).total_s
            )
            launch_s, eager_extra = self._eager_launch_s, eager - linear.total_s - head.total_s
        exposed_launch = max(0.0, launch_s - (gpu_s + eager_extra))
        host_s = self._step_s + self._per_seq_s * num_seqs
        if self.overlaps_host:
            host_s = max(0.0, host_s - (gpu_s + eager_extra + exposed_launch))
        overhead = eager_extra + exposed_launch + host_s
        if self._has_terms:
            # The fitted terms stand for host and kernel time the roofline does not see.
            total = gpu_s + overhead
            overhead += (
                self._with_terms(
                    total,
                    shape.num_prefill_tokens,
                    shape.prefill_attention_work,
                    shape.num_decode_seqs,
                    shape.decode_context_tokens,
                )
                - total
            )
        return StepTime(gpu_s + overhead, compute, memory, overhead, communication)


def _graph_replay(fam: FamilyCoeffs, latency_scale: float) -> FamilyCoeffs:
    """The family's coefficients with kernel latencies as replayed from a CUDA graph."""
    return FamilyCoeffs(
        gemm=replace(fam.gemm, latency_s=fam.gemm.latency_s * latency_scale),
        elementwise={
            op: replace(c, latency_s=c.latency_s * latency_scale)
            for op, c in fam.elementwise.items()
        },
        all_reduce=fam.all_reduce,
    )
