"""The two catalog records: a GPU and a model architecture."""

from __future__ import annotations

from dataclasses import dataclass

FP8_BYTES = 1
QUANTIZATIONS = ("fp8",)
"""Weight quantizations the simulator prices (``--quantization``)."""


@dataclass(frozen=True, slots=True)
class StepTerms:
    """Per-step time terms fitted to one user's measurements, added to the cost model's.

    Seconds per step, per new prompt token, per causal query-key pair of the prefill chunks,
    per decoding sequence and per K/V token the decoding sequences read. They correct the
    roofline where the engine spends time it does not model (host work per sequence on a
    CPU, a slower attention kernel), so each may be negative. All zero changes nothing.
    """

    step_s: float = 0.0
    prefill_token_s: float = 0.0
    attention_pair_s: float = 0.0
    decode_seq_s: float = 0.0
    kv_token_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Factors fitted to one user's measurements (``slotune sim calibrate``).

    Defaults change nothing. The cost model runs the GPU at ``compute`` times its peak
    FLOP/s and ``memory`` times its memory bandwidth (on top of the operator-level
    efficiencies of its calibration family), the interconnect at ``interconnect`` times its
    bandwidth plus ``all_reduce_latency_s`` per all-reduce, and ``step_overhead_s`` (when
    set) replaces the hand-set host time per engine step; ``step_terms`` are added to every
    step's time.
    """

    compute: float = 1.0
    memory: float = 1.0
    interconnect: float = 1.0
    step_overhead_s: float | None = None
    all_reduce_latency_s: float = 0.0
    step_terms: StepTerms = StepTerms()


@dataclass(frozen=True, slots=True)
class GPU:
    """One accelerator, from its datasheet.

    Attributes:
        id: lowercase-dashed catalog id, e.g. ``h100-sxm``.
        name: marketing name.
        bf16_flops: dense BF16/FP16 tensor FLOP/s.
        fp8_flops: dense FP8 tensor FLOP/s (the BF16 rate on parts without FP8).
        mem_bytes: device memory as CUDA/ROCm reports it (what vLLM's
            ``gpu_memory_utilization`` multiplies).
        mem_bw_bytes_s: memory bandwidth, bytes/s.
        interconnect_bw_bytes_s: GPU-to-GPU bandwidth, bytes/s, both directions together.
        source: where the numbers come from.
        calibration_family: which fitted efficiency set of ``calibration.yaml`` applies.
        efficiency: factors fitted to measurements of this GPU (``slotune sim calibrate``).
    """

    id: str
    name: str
    bf16_flops: float
    fp8_flops: float
    mem_bytes: int
    mem_bw_bytes_s: float
    interconnect_bw_bytes_s: float
    source: str = ""
    calibration_family: str = ""
    efficiency: Efficiency = Efficiency()


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer's shape, from its Hugging Face ``config.json``.

    Attributes:
        id: lowercase-dashed catalog id, e.g. ``llama-3.1-8b``.
        hf_name: canonical Hugging Face repository name.
        num_layers: decoder layers.
        hidden_size: model width.
        num_heads: attention (query) heads.
        num_kv_heads: key/value heads (grouped-query attention when below ``num_heads``).
        head_dim: width of one head.
        intermediate_size: width of the dense gated MLP.
        vocab_size: vocabulary, i.e. rows of the embedding and the LM head.
        num_params: total parameters (all experts counted).
        max_position_embeddings: the default ``max_model_len``.
        num_experts: routed experts per MoE layer; 0 for a dense model.
        num_active_experts: experts each token is routed to.
        moe_intermediate_size: width of one expert's gated MLP.
        dtype_bytes: bytes per weight (2 for BF16/FP16).
        source: where the numbers come from.
        aliases: other Hugging Face names that resolve to this entry.
    """

    id: str
    hf_name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    num_params: int
    max_position_embeddings: int
    num_experts: int = 0
    num_active_experts: int = 0
    moe_intermediate_size: int = 0
    dtype_bytes: int = 2
    source: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def is_moe(self) -> bool:
        """Whether the MLP is a routed mixture of experts."""
        return self.num_experts > 0

    @property
    def weight_bytes(self) -> int:
        """All weights in bytes at ``dtype_bytes`` per parameter."""
        return self.num_params * self.dtype_bytes

    def weight_bytes_at(self, quantization: str | None) -> int:
        """All weights in bytes served at ``quantization`` (None: the checkpoint's dtype).

        fp8 (vLLM's and SGLang's ``--quantization fp8``, TensorRT-LLM's FP8 checkpoints)
        stores the linear layers at one byte per weight; the embedding and the LM head keep
        ``dtype_bytes``.
        """
        if quantization is None:
            return self.weight_bytes
        embeddings = 2 * self.vocab_size * self.hidden_size
        return (self.num_params - embeddings) * FP8_BYTES + embeddings * self.dtype_bytes
